"""torchrun, 2 nodes × 2 workers (gloo), node1's clock 40 s ahead (libfaketime): global rank 2 (node1,
local rank 0) raises a ValueError at step 4. By the wall clocks, node0's consequences ("Connection
closed by peer") come 40 s before the cause.
Workers log in a bracketed layout with a rank field (``[time] [LEVEL] [rankN] name: msg``)."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.torchrun_gen import Node, TorchrunJob, command_lines, run

HERE = Path(__file__).resolve().parents[1]
JOB = TorchrunJob(nodes=[Node("node0"), Node("node1", clock_offset="+40s")], nproc=2,
                  worker_args=["--layout", "bracketed", "--fault", "exception", "--fault-rank", "2", "--fault-step", "4"])

if __name__ == "__main__":
    run(JOB, HERE / "out")
    finish(HERE, doc=__doc__, commands=command_lines(JOB), tools=("torch",), failure=True, rank=2, node="node1",
           category="uncaught exception", step=4, decisive="ValueError: sample 1834 has 0 tokens after truncation")
