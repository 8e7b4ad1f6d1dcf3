"""torch's own glog-style formatter (`I1207 11:05:59.602000 pid file.py:12] [rank1]:msg`, the layout
torchrun and torch.distributed's Python modules print), under torchrun, 1 node × 2 workers (gloo,
CPU): a config dump, steps, a `print`, a warning, a caught `ConnectionResetError` logged with its
traceback and the lines after it, and an uncaught exception on rank 1 at the end (`[rank1]:`
traceback)."""

from tests.corpus.library import PROGRAMS, generate_torchrun
from tests.scenarios.torchrun_gen import TorchrunJob

JOB = TorchrunJob(nproc=2, script=PROGRAMS / "train.py", worker_args=["--layout", "glog", "--fail-rank", "1"],
                  run_id="glog_python")

if __name__ == "__main__":
    generate_torchrun(__file__, __doc__, JOB, tools=("torch",))
