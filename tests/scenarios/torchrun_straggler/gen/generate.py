"""torchrun, 2 nodes × 2 workers (gloo), logging the README's way (``ranklog.get_logger``, JSON files,
``extra={"step": s, "loss": …, "compute_time": …}``): from step 10 on, global rank 2 (node1) computes
4× as long as before; every rank's step follows, since the all_reduce waits for it. The run ends
well (exit 0): no failure, but degraded — rank 2 is the straggler from step 10."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.torchrun_gen import CLASSES, Node, TorchrunJob, command_lines, run

HERE = Path(__file__).resolve().parents[1]
JOB = TorchrunJob(nodes=[Node("node0"), Node("node1")], nproc=2, script=CLASSES,
                  env={"RANKLOG_LOG_DIR": "{node_dir}/ranklog"},
                  worker_args=["--layout", "ranklog", "--steps", "24", "--step-seconds", "0.25", "--fault", "straggler",
                               "--fault-rank", "2", "--fault-step", "10"])

if __name__ == "__main__":
    codes = run(JOB, HERE / "out")
    assert codes == [0, 0], codes
    finish(HERE, doc=__doc__, commands=command_lines(JOB),
           tools=("torch",), failure=False, status="degraded", rank=2, node="node1", category="straggler",
           step=10, decisive='"step":10')
