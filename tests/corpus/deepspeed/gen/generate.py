"""DeepSpeed's own logger (``deepspeed.utils.logger``: ``[time] [LEVEL] [file:line:func] msg`` on
stdout) under torchrun, 1 node × 2 workers (gloo, CPU, ``DS_BUILD_OPS=0``): a config dump, steps, a
warning, a caught ``ConnectionResetError`` logged with its traceback and the lines after it, and an
uncaught exception on rank 1 at the end (``[rank1]:`` traceback)."""

from tests.corpus.library import PROGRAMS, entry_dir, finish, torchrun_entry
from tests.scenarios.torchrun_gen import TorchrunJob

HERE = entry_dir(__file__)
JOB = TorchrunJob(nproc=2, script=PROGRAMS / "train.py", worker_args=["--layout", "deepspeed", "--fail-rank", "1"],
                  run_id="deepspeed", env={"DS_BUILD_OPS": "0"})

if __name__ == "__main__":
    commands, _ = torchrun_entry(HERE, JOB)
    finish(HERE, doc=__doc__, commands=commands, tools=("torch", "deepspeed"))
