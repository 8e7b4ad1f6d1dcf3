"""verl ``Tracking`` console logger (numpy 2): a corrupted sample from step 5 on makes the real gradient
norm NaN; the console prints ``actor/grad_norm:np.float64(nan)`` and the loop goes on."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.verl_gen import VerlRun, command_lines, run

HERE = Path(__file__).resolve().parents[1]
JOB = VerlRun(backends="console", worker_args=["--bad-step", "5", "--bad-value", "nan", "--steps", "8"])

if __name__ == "__main__":
    run(JOB, HERE / "out")
    finish(HERE, doc=__doc__, commands=command_lines(JOB), tools=("verl", "numpy", "torch"), failure=True, rank=None,
           node=None, category="non-finite loss/gradients", step=5, decisive="actor/grad_norm:np.float64(nan)")
