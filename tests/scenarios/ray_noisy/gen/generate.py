"""Loud but healthy: workers warn every step (deprecations, a slow data loader), one task fails on its
first attempt and succeeds on Ray's retry, a worker logs a handled exception with its traceback at
WARNING and carries on, and the run finishes normally. Nothing here is the cause of a failure."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.ray_gen import run

HERE = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    ray_run = run(HERE)
    finish(HERE, doc=ray_run.doc(__doc__), commands=ray_run.commands(), tools=("ray",), failure=False)
