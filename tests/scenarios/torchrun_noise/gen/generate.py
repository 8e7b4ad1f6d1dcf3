"""torchrun, 1 node × 2 workers (gloo): a healthy run that is loud — a FutureWarning on every rank, an
ERROR "checkpoint upload failed … Connection reset by peer; retrying" on rank 1 followed by a
successful retry, gradient-clipping warnings. No failure: nothing may be blamed.
Workers log in loguru's default layout."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.torchrun_gen import TorchrunJob, command_lines, run

HERE = Path(__file__).resolve().parents[1]
JOB = TorchrunJob(nproc=2, worker_args=["--layout", "loguru", "--fault", "noise", "--fault-rank", "1"])

if __name__ == "__main__":
    run(JOB, HERE / "out")
    finish(HERE, doc=__doc__, commands=command_lines(JOB), tools=("torch", "loguru"), failure=False)
