"""torchrun, 2 nodes × 2 workers (gloo), logging as Hugging Face's example scripts do, one text line when a
step's compute is done (before its all_reduce) and one when the step is done: from step 8 on, global
rank 1 (node0) computes 4× as long as before; every rank's step follows (the all_reduce waits for
it). No duration field is read: the straggler shows in the timing of its lines alone. The run ends
well (exit 0): degraded, rank 1 from step 8."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.torchrun_gen import CLASSES, Node, TorchrunJob, command_lines, run

HERE = Path(__file__).resolve().parents[1]
JOB = TorchrunJob(nodes=[Node("node0"), Node("node1")], nproc=2, script=CLASSES,
                  worker_args=["--layout", "dashes", "--steps", "20", "--step-seconds", "0.25", "--fault", "straggler",
                               "--fault-rank", "1", "--fault-step", "8"])

if __name__ == "__main__":
    codes = run(JOB, HERE / "out")
    assert codes == [0, 0], codes
    finish(HERE, doc=__doc__, commands=command_lines(JOB), tools=("torch",), failure=False, status="degraded",
           rank=1, node="node0", category="straggler", step=8, decisive="step 8 computed")
