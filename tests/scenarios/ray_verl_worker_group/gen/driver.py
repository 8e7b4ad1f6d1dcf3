"""A verl-style worker group: actors named ``<prefix>WorkerDict_0:<rank>`` (verl's
``RayWorkerGroup`` naming), workers logging ``[Rank N]`` through Ray's structured JSON logging, the
driver calling ``generate_sequences`` on all of them each step. At step 3 rank 1 raises, and the
driver's ``ray.get`` raises RayTaskError naming ``ray::WorkerDict.generate_sequences() (pid=…)``."""

import logging
import sys

import ray

ray.init(num_cpus=2, include_dashboard=False, _temp_dir=sys.argv[1],
         logging_config=ray.LoggingConfig(encoding="JSON", log_level="INFO"))
log = logging.getLogger("main_ppo")
PREFIX = "kZ3xWq"  # verl draws a random name prefix per worker group
WORLD = 4


@ray.remote(num_cpus=0.25)
class WorkerDict:
    def __init__(self, rank: int, world_size: int) -> None:
        self.rank = rank
        self.log = logging.getLogger("verl.workers.fsdp_workers")
        self.log.info("[Rank %d] init model, world_size=%d", rank, world_size)

    def generate_sequences(self, step: int) -> int:
        self.log.info("[Rank %d] generate_sequences: 64 prompts", self.rank, extra={"step": step})
        if self.rank == 1 and step == 3:
            batch = {"input_ids": (64, 512), "attention_mask": (64, 511)}
            raise RuntimeError(f"The size of tensor a (512) must match the size of tensor b (511) at non-singleton "
                               f"dimension 1: {batch}")
        return 64


workers = [WorkerDict.options(name=f"{PREFIX}WorkerDict_0:{rank}").remote(rank, WORLD) for rank in range(WORLD)]
for step in range(1, 6):
    done = sum(ray.get([w.generate_sequences.remote(step) for w in workers]))
    log.info("step %d done: %d sequences", step, done)
