"""Four trainer actors; rank 2's constructor raises (a bad shard path), so the actor dies and every
call on it fails with ActorDiedError in the driver."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.ray_gen import run

HERE = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    ray_run = run(HERE)
    finish(HERE, doc=ray_run.doc(__doc__), commands=ray_run.commands(), tools=("ray",), failure=True, rank=2,
           node=ray_run.host, category="uncaught exception", step=None,
           decisive="The actor died because of an error raised in its creation task")
