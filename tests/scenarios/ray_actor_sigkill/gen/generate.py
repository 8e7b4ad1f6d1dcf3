"""Four trainer actors; after step 2 the driver SIGKILLs rank 3's worker process from outside, the
way the kernel's OOM killer ends a process (no traceback, no log line from the victim)."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.ray_gen import run

HERE = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    ray_run = run(HERE)
    finish(HERE, doc=ray_run.doc(__doc__), commands=ray_run.commands(), tools=("ray",), failure=True, rank=3,
           node=ray_run.host, category="Ray actor death", step=2, decisive="Worker exit type: SYSTEM_ERROR")
