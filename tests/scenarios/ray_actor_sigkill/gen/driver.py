"""Four trainer actors; after step 2 the driver SIGKILLs rank 3's worker process from outside, the
way the kernel's OOM killer ends a process (no traceback, no log line from the victim)."""

import logging
import os
import signal
import sys

import ray

ray.init(num_cpus=2, include_dashboard=False, _temp_dir=sys.argv[1])
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
log = logging.getLogger("driver")


@ray.remote(num_cpus=0.25)
class Trainer:
    def __init__(self, rank: int) -> None:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.log = logging.getLogger("trainer")
        self.rank = rank

    def pid(self) -> int:
        return os.getpid()

    def step(self, step: int) -> float:
        self.log.info("[Rank %d] step %d loss %.3f", self.rank, step, 1.0 / (step + 1))
        return 1.0 / (step + 1)


trainers = [Trainer.options(name=f"trainer_{r}").remote(r) for r in range(4)]
victim = ray.get(trainers[3].pid.remote())
for step in range(5):
    losses = ray.get([t.step.remote(step) for t in trainers])
    log.info("step %d mean loss %.3f", step, sum(losses) / len(losses))
    if step == 2:
        os.kill(victim, signal.SIGKILL)
