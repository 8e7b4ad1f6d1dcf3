"""torchrun, 1 node × 3 workers (gloo, 4 micro-steps per all_reduce): rank 1 blocks forever in its data
loader at step 3; ranks 0 and 2 log their micro-steps for two more seconds, then wait silently in
all_reduce. No error anywhere: an outer ``timeout`` SIGTERMs torchrun after 60 s.
Workers log in a time-only layout (``HH:MM:SS LEVEL name msg``: no date on the line)."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.torchrun_gen import TorchrunJob, command_lines, run

HERE = Path(__file__).resolve().parents[1]
JOB = TorchrunJob(nproc=3, outer_timeout=60, worker_args=["--layout", "timeonly", "--fault", "hang", "--fault-rank", "1", "--fault-step", "3",
                                                     "--accum", "4", "--step-seconds", "0.5"])

if __name__ == "__main__":
    run(JOB, HERE / "out")
    finish(HERE, doc=__doc__, commands=command_lines(JOB), tools=("torch",), failure=True, rank=1, node="node0",
           category="hang/silence", step=3, decisive="loading shard 3")
