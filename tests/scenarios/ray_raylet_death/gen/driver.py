"""Four trainer actors; after step 2 the raylet (Ray's per-node daemon) is SIGKILLed from outside, as
the kernel's OOM killer or a node failure ends it. Every worker of the node goes down with it and
the driver loses its node: no rank is at fault, the node is."""

import logging
import os
import signal
import sys

import ray

ray.init(num_cpus=2, include_dashboard=False, _temp_dir=sys.argv[1])
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
log = logging.getLogger("driver")


def raylet_pid() -> int:
    """The raylet this driver started (a child process named ``raylet``), found through /proc."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)
                name = fields[0].split("(", 1)[1]
                parent = int(fields[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if name == "raylet" and parent == os.getpid():
            return int(entry)
    raise RuntimeError("no raylet child process")


@ray.remote(num_cpus=0.25)
class Trainer:
    def __init__(self, rank: int) -> None:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.log = logging.getLogger("trainer")
        self.rank = rank

    def step(self, step: int) -> float:
        self.log.info("[Rank %d] step %d loss %.3f", self.rank, step, 1.0 / (step + 1))
        return 1.0 / (step + 1)


trainers = [Trainer.options(name=f"trainer_{r}").remote(r) for r in range(4)]
for step in range(5):
    losses = ray.get([t.step.remote(step) for t in trainers], timeout=60)
    log.info("step %d mean loss %.3f", step, sum(losses) / len(losses))
    if step == 2:
        os.kill(raylet_pid(), signal.SIGKILL)
