"""Ray Train V2 (Ray 2.60): a ``TorchTrainer`` of 4 CPU workers (gloo) trains 8 steps and ends well; the
driver exits 0. No failure (Ray's own start-up noise on a busy machine included)."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.ray_gen import run

HERE = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    ray_run = run(HERE, timeout=600)
    assert ray_run.exit_code == 0, "the trainer was supposed to end well"
    finish(HERE, doc=ray_run.doc(__doc__), commands=ray_run.commands(), tools=("ray", "torch"), failure=False)
