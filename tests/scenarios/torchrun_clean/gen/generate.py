"""torchrun, 1 node × 2 workers (gloo): a clean run of 6 steps; every rank finishes, torchrun exits 0."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.torchrun_gen import TorchrunJob, command_lines, run

HERE = Path(__file__).resolve().parents[1]
JOB = TorchrunJob(nproc=2, worker_args=["--fault", "none"])

if __name__ == "__main__":
    run(JOB, HERE / "out")
    finish(HERE, doc=__doc__, commands=command_lines(JOB), tools=("torch",), failure=False)
