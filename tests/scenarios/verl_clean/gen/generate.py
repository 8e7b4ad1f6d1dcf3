"""verl ``Tracking`` console and file loggers, a healthy run of 8 steps: every metric finite."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.verl_gen import VerlRun, command_lines, run

HERE = Path(__file__).resolve().parents[1]
JOB = VerlRun(backends="console,file", worker_args=["--steps", "8"])

if __name__ == "__main__":
    run(JOB, HERE / "out")
    finish(HERE, doc=__doc__, commands=command_lines(JOB), tools=("verl", "numpy", "torch"), failure=False)
