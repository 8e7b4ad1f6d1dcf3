"""Four trainer actors; rank 2's constructor raises (a bad shard path), so the actor dies and every
call on it fails with ActorDiedError in the driver."""

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
        self.log.info("[Rank %d] loading shard %d", rank, rank)
        if rank == 2:
            raise FileNotFoundError(f"[Errno 2] No such file or directory: '/data/shards/part-{rank:05d}.parquet'")

    def step(self, step: int) -> float:
        self.log.info("[Rank %d] step %d loss %.3f", self.rank, step, 1.0 / (step + 1))
        return 1.0 / (step + 1)


trainers = [Trainer.options(name=f"trainer_{r}").remote(r) for r in range(4)]
for step in range(3):
    losses = ray.get([t.step.remote(step) for t in trainers])
    log.info("step %d mean loss %.3f", step, sum(losses) / len(losses))
