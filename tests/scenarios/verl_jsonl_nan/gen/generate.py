"""verl ``Tracking`` file logger alone (JSONL, orjson): from step 4 on the gradient norm and the loss are
non-finite, written as ``null``. The metrics file is the only output kept."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.verl_gen import VerlRun, command_lines, run

HERE = Path(__file__).resolve().parents[1]
JOB = VerlRun(backends="file", worker_args=["--bad-step", "4", "--bad-value", "nan", "--steps", "8"])

if __name__ == "__main__":
    run(JOB, HERE / "out")
    finish(HERE, doc=__doc__, commands=command_lines(JOB), tools=("verl", "numpy", "torch"), failure=True, rank=None,
           node=None, category="non-finite loss/gradients", step=4, decisive='"actor/grad_norm":null')
