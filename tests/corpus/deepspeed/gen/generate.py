"""DeepSpeed's own logger (``deepspeed.utils.logger``: ``[time] [LEVEL] [file:line:func] msg`` on
stdout) under torchrun, 1 node × 2 workers (gloo, CPU, ``DS_BUILD_OPS=0``): a config dump, steps, a
warning, a caught ``ConnectionResetError`` logged with its traceback and the lines after it, and an
uncaught exception on rank 1 at the end (``[rank1]:`` traceback)."""

from tests.corpus.library import PROGRAMS, generate_torchrun
from tests.scenarios.torchrun_gen import TorchrunJob

JOB = TorchrunJob(nproc=2, script=PROGRAMS / "train.py", worker_args=["--layout", "deepspeed", "--fail-rank", "1"],
                  run_id="deepspeed", env={"DS_BUILD_OPS": "0"})

if __name__ == "__main__":
    generate_torchrun(__file__, __doc__, JOB, tools=("torch", "deepspeed"))
