"""torchrun, 2 nodes × 2 workers (gloo, 4 micro-steps per all_reduce): global rank 3 (node1) blocks in
its data loader at step 2; the others log on for two seconds, then wait in all_reduce. An outer
``timeout`` SIGTERMs both launchers after 60 s. No error anywhere.
Workers log in rich's ``RichHandler`` (time-only, repeated times omitted, wrapped lines)."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.torchrun_gen import Node, TorchrunJob, command_lines, run

HERE = Path(__file__).resolve().parents[1]
JOB = TorchrunJob(nodes=[Node("node0"), Node("node1")], nproc=2, outer_timeout=60,
                  worker_args=["--layout", "rich", "--fault", "hang", "--fault-rank", "3", "--fault-step", "2", "--accum", "4",
                               "--step-seconds", "0.5"])

if __name__ == "__main__":
    run(JOB, HERE / "out")
    finish(HERE, doc=__doc__, commands=command_lines(JOB), tools=("torch", "rich"), failure=True, rank=3, node="node1",
           category="hang/silence", step=2, decisive="loading shard 2")
