"""Python logging with a time-only datefmt (`%H:%M:%S`: the date comes from the file's context), under
torchrun, 1 node × 2 workers (gloo, CPU): a config dump, steps, a `print`, a warning, a caught
`ConnectionResetError` logged with its traceback and the lines after it, and an uncaught exception
on rank 0 at the end (`[rank0]:` traceback)."""

from tests.corpus.library import PROGRAMS, generate_torchrun
from tests.scenarios.torchrun_gen import TorchrunJob

JOB = TorchrunJob(nproc=2, script=PROGRAMS / "train.py", worker_args=["--layout", "timeonly", "--fail-rank", "0"],
                  run_id="logging_timeonly")

if __name__ == "__main__":
    generate_torchrun(__file__, __doc__, JOB, tools=("torch",))
