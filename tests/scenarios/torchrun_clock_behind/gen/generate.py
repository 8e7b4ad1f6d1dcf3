"""torchrun, 2 nodes × 2 workers (gloo), node0's clock 30 s behind (libfaketime): global rank 1 (node0,
local rank 1) dies of a CUDA OOM (text raised by the generator) at step 3.
Workers log in DeepSpeed's logger (``[time] [LEVEL] [file:line:func] msg``)."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.torchrun_gen import Node, TorchrunJob, command_lines, run

HERE = Path(__file__).resolve().parents[1]
JOB = TorchrunJob(nodes=[Node("node0", clock_offset="-30s"), Node("node1")], nproc=2,
                  worker_args=["--layout", "deepspeed", "--fault", "cuda_oom", "--fault-rank", "1", "--fault-step", "3"])

if __name__ == "__main__":
    run(JOB, HERE / "out")
    finish(HERE, doc=__doc__, commands=command_lines(JOB), tools=("torch", "deepspeed"), failure=True, rank=1, node="node0",
           category="CUDA OOM", step=3, decisive="torch.OutOfMemoryError: CUDA out of memory")
