"""Ray's memory monitor kills a worker. The node's kill threshold is set 600 MB above what the machine
uses when the driver starts (``RAY_memory_usage_threshold`` is a fraction of the node's memory, so
it is computed from ``/proc/meminfo``); the rollout task for rank 0 then grows a buffer by 64 MB
every 0.1 s (2 GB at most) until the monitor kills its worker. ``RAY_task_oom_retries=0``: no
retry, the driver's ``ray.get`` raises OutOfMemoryError."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.ray_gen import run

HERE = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    ray_run = run(HERE)
    finish(HERE, doc=ray_run.doc(__doc__), commands=ray_run.commands(), tools=("ray",), failure=True, rank=0,
           node=ray_run.host, category="host OOM kill", step=None,
           decisive="killed due to the node running low on memory")
