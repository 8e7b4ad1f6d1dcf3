"""structlog's `ConsoleRenderer` without colours (ISO UTC times, `[level ]`, key=value pairs), under
torchrun, 1 node × 2 workers (gloo, CPU): a config dump, steps, a `print`, a warning, a caught
`ConnectionResetError` logged with its traceback and the lines after it."""

from tests.corpus.library import PROGRAMS, generate_torchrun
from tests.scenarios.torchrun_gen import TorchrunJob

JOB = TorchrunJob(nproc=2, script=PROGRAMS / "train.py", worker_args=["--layout", "structlog", "--fail-rank", "-1"],
                  run_id="structlog")

if __name__ == "__main__":
    generate_torchrun(__file__, __doc__, JOB, tools=("torch", "structlog"))
