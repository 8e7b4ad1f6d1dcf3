"""Four trainer actors; at step 2 rank 1 calls ``os._exit(3)`` (a native library bailing out: no
traceback, no log line), so the driver's next ``ray.get`` fails with ActorDiedError."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.ray_gen import run

HERE = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    ray_run = run(HERE)
    finish(HERE, doc=ray_run.doc(__doc__), commands=ray_run.commands(), tools=("ray",), failure=True, rank=1,
           node=ray_run.host, category="Ray actor death", step=2, decisive="Worker exit type: SYSTEM_ERROR")
