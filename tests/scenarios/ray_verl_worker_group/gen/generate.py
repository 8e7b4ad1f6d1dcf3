"""A verl-style worker group: actors named ``<prefix>WorkerDict_0:<rank>`` (verl's
``RayWorkerGroup`` naming), workers logging ``[Rank N]`` through Ray's structured JSON logging, the
driver calling ``generate_sequences`` on all of them each step. At step 3 rank 1 raises, and the
driver's ``ray.get`` raises RayTaskError naming ``ray::WorkerDict.generate_sequences() (pid=…)``."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.ray_gen import run

HERE = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    ray_run = run(HERE)
    finish(HERE, doc=ray_run.doc(__doc__), commands=ray_run.commands(), tools=("ray",), failure=True, rank=1,
           node=ray_run.host, category="uncaught exception", step=3,
           decisive="RuntimeError: The size of tensor a (512) must match the size of tensor b (511)")
