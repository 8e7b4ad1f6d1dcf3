"""Four trainer actors; at step 2 rank 1 calls ``os._exit(3)`` (a native library bailing out: no
traceback, no log line), so the driver's next ``ray.get`` fails with ActorDiedError."""

import logging
import os
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

    def step(self, step: int) -> float:
        self.log.info("[Rank %d] step %d loss %.3f", self.rank, step, 1.0 / (step + 1))
        if self.rank == 1 and step == 2:
            os._exit(3)
        return 1.0 / (step + 1)


trainers = [Trainer.options(name=f"trainer_{r}").remote(r) for r in range(4)]
for step in range(5):
    losses = ray.get([t.step.remote(step) for t in trainers])
    log.info("step %d mean loss %.3f", step, sum(losses) / len(losses))
