"""torchrun, 2 nodes × 2 workers (gloo), logging as Hugging Face's example scripts do
(``2026-… - train - INFO - …``): node1 dies in step 5 — its torchrun agent and both of its workers are
SIGKILLed at one moment (as soon as one of them logged ``step 4 done``), as when the machine loses power. Its logs simply stop; node0's ranks then
lose their peers in the step's all_reduce (gloo: ``Connection closed by peer``) and node0's torchrun
reports its own rank as the failure. The root cause is the lost node and its ranks 2-3."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.torchrun_gen import CLASSES, Node, NodeLoss, TorchrunJob, command_lines, run

HERE = Path(__file__).resolve().parents[1]
JOB = TorchrunJob(nodes=[Node("node0"), Node("node1")], nproc=2, script=CLASSES,
                  worker_args=["--layout", "dashes", "--steps", "8"],
                  node_loss=NodeLoss("node1", r"step 4 done"))

if __name__ == "__main__":
    run(JOB, HERE / "out")
    finish(HERE, doc=__doc__, commands=[*command_lines(JOB), "[host node1] SIGKILL to every process of the node "
                                        "once a worker logged 'step 4 done'"], tools=("torch",),
           failure=True, rank=[2, 3], node="node1", category="node lost", step=5, decisive="step 4 done")
