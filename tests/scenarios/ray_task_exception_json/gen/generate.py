"""Data-preparation tasks, one per shard (``[Rank N]`` is the shard's rank), Ray structured JSON logging (``ray.LoggingConfig(encoding="JSON")``); the
task for rank 2 raises on a corrupt record and the driver's ``ray.get`` re-raises it as RayTaskError.
``max_calls=1`` gives each task its own worker process, as Ray does for tasks holding GPUs."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.ray_gen import run

HERE = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    ray_run = run(HERE)
    finish(HERE, doc=ray_run.doc(__doc__), commands=ray_run.commands(), tools=("ray",), failure=True, rank=2,
           node=ray_run.host, category="uncaught exception", step=None,
           decisive="ValueError: corrupt record at byte 81920 of shard 2")
