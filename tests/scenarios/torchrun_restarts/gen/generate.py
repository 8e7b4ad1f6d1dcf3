"""torchrun with ``--max-restarts 2``, 1 node × 2 workers (gloo): in attempt 0 rank 1 raises a ValueError
at step 3; in attempts 1 and 2 rank 0 fails while resuming. The first failure of the chain (attempt 0,
rank 1) is the root cause, not the last.
Workers log in ``basicConfig()``'s default (``LEVEL:name:msg``, no time at all)."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.torchrun_gen import TorchrunJob, command_lines, run

HERE = Path(__file__).resolve().parents[1]
JOB = TorchrunJob(nproc=2, max_restarts=2, worker_args=["--layout", "basic", "--fault", "restart", "--fault-rank", "1", "--fault-step", "3"])

if __name__ == "__main__":
    run(JOB, HERE / "out")
    finish(HERE, doc=__doc__, commands=command_lines(JOB), tools=("torch",), failure=True, rank=1, node="node0",
           category="uncaught exception", step=3, decisive="ValueError: sample 1834 has 0 tokens after truncation")
