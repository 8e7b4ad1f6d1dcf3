"""Data-preparation tasks, one per shard (``[Rank N]`` is the shard's rank), Ray structured JSON logging (``ray.LoggingConfig(encoding="JSON")``); the
task for rank 2 raises on a corrupt record and the driver's ``ray.get`` re-raises it as RayTaskError.
``max_calls=1`` gives each task its own worker process, as Ray does for tasks holding GPUs."""

import logging
import sys
import time

import ray

ray.init(num_cpus=2, include_dashboard=False, _temp_dir=sys.argv[1],
         logging_config=ray.LoggingConfig(encoding="JSON", log_level="INFO"))
log = logging.getLogger("driver")


@ray.remote(num_cpus=0.5, max_calls=1, max_retries=0)
def tokenize_shard(rank: int) -> int:
    shard_log = logging.getLogger("prep")
    for chunk in range(3):
        shard_log.info("[Rank %d] tokenized chunk %d", rank, chunk)
        time.sleep(0.05)
        if rank == 2 and chunk == 1:
            raise ValueError(f"corrupt record at byte 81920 of shard {rank}: invalid UTF-8 start byte 0xff")
    return rank


log.info("preparing 4 shards")
counts = ray.get([tokenize_shard.remote(r) for r in range(4)])
log.info("prepared %s", counts)
