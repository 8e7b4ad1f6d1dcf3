"""torchrun, 1 node × 2 workers (gloo): rank 1 is SIGKILLed at step 3, as the kernel OOM killer does: no
traceback, exit code -9; torchrun then stops rank 0.
Workers log in structlog's console renderer (ISO UTC times, ``[level    ]``)."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.torchrun_gen import TorchrunJob, command_lines, run

HERE = Path(__file__).resolve().parents[1]
JOB = TorchrunJob(nproc=2, worker_args=["--layout", "structlog", "--fault", "sigkill", "--fault-rank", "1", "--fault-step", "3"])

if __name__ == "__main__":
    run(JOB, HERE / "out")
    finish(HERE, doc=__doc__, commands=command_lines(JOB), tools=("torch", "structlog"), failure=True, rank=1, node="node0",
           category="killed (SIGKILL)", step=3, decisive="Signal 9 (SIGKILL)")
