"""torchrun, 1 node × 2 workers (gloo): a clean run of 6 steps; every rank finishes, torchrun exits 0.
Workers log in transformers' logging (its explicit format ``[INFO|file.py:N] time >> msg``)."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.torchrun_gen import TorchrunJob, command_lines, run

HERE = Path(__file__).resolve().parents[1]
JOB = TorchrunJob(nproc=2, worker_args=["--layout", "transformers", "--fault", "none"])

if __name__ == "__main__":
    run(JOB, HERE / "out")
    finish(HERE, doc=__doc__, commands=command_lines(JOB), tools=("torch", "transformers"), failure=False)
