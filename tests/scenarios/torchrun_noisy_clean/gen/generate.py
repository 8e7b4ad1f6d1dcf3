"""torchrun, 2 nodes × 2 workers (gloo), logging in loguru's layout: a run that ends well (torchrun exits 0,
every rank finishes its 8 steps) but logs like real runs do — a FutureWarning, ``error_rate=0.00
timeout=1800s`` printed, a clipping warning, and metrics uploads that fail with a ``ConnectionResetError:
[Errno 104] Connection reset by peer`` traceback — on rank 1 a bare one on stderr (step 2), on rank 0
one logged at ERROR (step 4) — and succeed on the next try. No failure."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.torchrun_gen import CLASSES, Node, TorchrunJob, command_lines, run

HERE = Path(__file__).resolve().parents[1]
JOB = TorchrunJob(nodes=[Node("node0"), Node("node1")], nproc=2, script=CLASSES,
                  worker_args=["--layout", "loguru", "--steps", "8", "--fault", "noisy", "--fault-rank", "1"])

if __name__ == "__main__":
    codes = run(JOB, HERE / "out")
    assert codes == [0, 0], codes
    finish(HERE, doc=__doc__, commands=command_lines(JOB), tools=("torch",), failure=False)
