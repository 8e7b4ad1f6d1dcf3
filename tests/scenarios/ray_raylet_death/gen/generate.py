"""Four trainer actors; after step 2 the raylet (Ray's per-node daemon) is SIGKILLed from outside, as
the kernel's OOM killer or a node failure ends it. The actors already placed keep answering the
driver's direct calls, so the driver finishes its steps and exits 0 — but the node has lost its
raylet (nothing new can be scheduled there): a failure of the node, not of any rank."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.ray_gen import run

HERE = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    ray_run = run(HERE)
    finish(HERE, doc=ray_run.doc(__doc__), commands=ray_run.commands(), tools=("ray",), failure=True, rank=None,
           node=ray_run.host, category="Ray actor death", step=None,
           decisive="Raylet is terminated. Termination is unexpected")
