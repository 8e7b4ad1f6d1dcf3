"""Python logging with `%(asctime)s - %(name)s - %(levelname)s - %(message)s` (the logging cookbook's
layout), under torchrun, 1 node × 2 workers (gloo, CPU): a config dump, steps, a `print`, a warning,
a caught `ConnectionResetError` logged with its traceback and the lines after it, and an uncaught
exception on rank 1 at the end (`[rank1]:` traceback)."""

from tests.corpus.library import PROGRAMS, generate_torchrun
from tests.scenarios.torchrun_gen import TorchrunJob

JOB = TorchrunJob(nproc=2, script=PROGRAMS / "train.py", worker_args=["--layout", "dash", "--fail-rank", "1"],
                  run_id="logging_dash")

if __name__ == "__main__":
    generate_torchrun(__file__, __doc__, JOB, tools=("torch",))
