"""torchrun, 2 nodes × 2 workers (gloo): global rank 3 (node1, local rank 1) raises an uncaught
ValueError at step 3; its peers then fail with gloo's "Connection closed by peer".
Workers log in torch's glog-style formatter (``I1207 11:05:59.602000 pid file.py:N] [rankN]:msg``)."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.torchrun_gen import Node, TorchrunJob, command_lines, run

HERE = Path(__file__).resolve().parents[1]
JOB = TorchrunJob(nodes=[Node("node0"), Node("node1")], nproc=2,
                  worker_args=["--layout", "glog", "--fault", "exception", "--fault-rank", "3", "--fault-step", "3"])

if __name__ == "__main__":
    run(JOB, HERE / "out")
    finish(HERE, doc=__doc__, commands=command_lines(JOB), tools=("torch",), failure=True, rank=3, node="node1",
           category="uncaught exception", step=3, decisive="ValueError: sample 1834 has 0 tokens after truncation")
