"""torchrun, 2 nodes × 2 workers (gloo), glog's layout, with ranklog's flight recorder on
(``ranklog.configure(flight_recorder=True)``: torch records every collective, ranklog dumps them beside
the rank's logs): global rank 1 (node0) blocks in its data loader before step 4; the others enter
step 4's all_reduce and time out after 10 s (gloo's ``Timed out waiting 10000ms for recv``), die
of it and dump their recorders; torchrun then stops rank 1 with SIGTERM and it dumps its own,
which ends one collective before the others'. Root cause: rank 1 never entered that all_reduce."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.torchrun_gen import CLASSES, Node, TorchrunJob, command_lines, run

HERE = Path(__file__).resolve().parents[1]
JOB = TorchrunJob(nodes=[Node("node0"), Node("node1")], nproc=2, script=CLASSES,
                  env={"RANKLOG_LOG_DIR": "{node_dir}/ranklog"},
                  worker_args=["--layout", "glog", "--steps", "8", "--fault", "hang", "--fault-rank", "1",
                               "--fault-step", "4", "--pg-timeout", "10", "--flight-recorder"])

if __name__ == "__main__":
    run(JOB, HERE / "out")
    finish(HERE, doc=__doc__, commands=command_lines(JOB),
           tools=("torch",), failure=True, rank=1, node="node0", category="hang/silence", step=4,
           decisive="step 3 done")
