"""verl ``Tracking`` console and file loggers: an infinite input at step 6 makes the loss ``inf`` and
the gradient norm NaN (``np.float64(inf)``/``np.float64(nan)`` on the console, ``null`` in JSONL)."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.verl_gen import VerlRun, command_lines, run

HERE = Path(__file__).resolve().parents[1]
JOB = VerlRun(backends="console,file", worker_args=["--bad-step", "6", "--bad-value", "inf", "--steps", "9"])

if __name__ == "__main__":
    run(JOB, HERE / "out")
    finish(HERE, doc=__doc__, commands=command_lines(JOB), tools=("verl", "numpy", "torch"), failure=True, rank=None,
           node=None, category="non-finite loss/gradients", step=6, decisive="np.float64(inf)")
