"""torchrun, 2 nodes × 2 workers (gloo), logging in glog's layout (``I1207 10:00:01.123000 4242 train.py:88] …``):
the data-loader worker of global rank 3 (node1) is SIGKILLed while it loads the batch of step 4 and
the rank waits for it — what the kernel's OOM killer does to a worker whose memory grew. torch
raises ``DataLoader worker (pid N) is killed by signal: Killed.`` chained to ``… exited
unexpectedly``; the other ranks lose rank 3 in the next all_reduce."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.torchrun_gen import CLASSES, Node, TorchrunJob, command_lines, run

HERE = Path(__file__).resolve().parents[1]
JOB = TorchrunJob(nodes=[Node("node0"), Node("node1")], nproc=2, script=CLASSES,
                  worker_args=["--layout", "glog", "--steps", "8", "--fault", "loader_killed", "--fault-rank", "3",
                               "--fault-step", "4"])

if __name__ == "__main__":
    run(JOB, HERE / "out")
    finish(HERE, doc=__doc__, commands=command_lines(JOB), tools=("torch",), failure=True, rank=3, node="node1",
           category="data loader worker died", step=4, decisive="is killed by signal: Killed")
