"""torchrun, 1 node × 3 workers (gloo): rank 1 dies of a CUDA out-of-memory error at step 4 (GPU-only
text, raised by the generator as ``torch.OutOfMemoryError``); its peers then lose their gloo connection.
Workers log in accelerate's logger under its examples' basicConfig (``MM/DD/YYYY HH:MM:SS - LEVEL - name - msg``)."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.torchrun_gen import TorchrunJob, command_lines, run

HERE = Path(__file__).resolve().parents[1]
JOB = TorchrunJob(nproc=3, worker_args=["--layout", "accelerate", "--fault", "cuda_oom", "--fault-rank", "1", "--fault-step", "4"])

if __name__ == "__main__":
    run(JOB, HERE / "out")
    finish(HERE, doc=__doc__, commands=command_lines(JOB), tools=("torch", "accelerate"), failure=True, rank=1, node="node0",
           category="CUDA OOM", step=4, decisive="torch.OutOfMemoryError: CUDA out of memory")
