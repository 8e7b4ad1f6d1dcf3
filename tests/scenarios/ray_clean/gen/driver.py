"""A healthy run: a named actor group trains a few steps, logs progress, and the driver shuts Ray down
cleanly."""

import logging
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
        loss = 2.0 / (step + 2)
        self.log.info("[Rank %d] step %d loss %.4f", self.rank, step, loss)
        return loss


trainers = [Trainer.options(name=f"trainer_{r}").remote(r) for r in range(4)]
for step in range(6):
    losses = ray.get([t.step.remote(step) for t in trainers])
    log.info("step %d mean loss %.4f", step, sum(losses) / len(losses))
log.info("training finished")
ray.shutdown()
