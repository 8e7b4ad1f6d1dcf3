"""Ray's memory monitor kills a worker. The node's kill threshold is set 600 MB above what the machine
uses when the driver starts (``RAY_memory_usage_threshold`` is a fraction of the node's memory, so
it is computed from ``/proc/meminfo``); the rollout task for rank 0 then grows a buffer by 64 MB
every 0.1 s (2 GB at most) until the monitor kills its worker. ``RAY_task_oom_retries=0``: no
retry, the driver's ``ray.get`` raises OutOfMemoryError."""

import logging
import os
import sys
import time


def _meminfo() -> dict[str, int]:
    with open("/proc/meminfo") as handle:
        return {line.split(":")[0]: int(line.split()[1]) * 1024 for line in handle}


info = _meminfo()
used = info["MemTotal"] - info["MemAvailable"]
# Ray's own setting names, case and all.
SETTINGS = {"RAY_memory_usage_threshold": f"{(used + 600 * 2**20) / info['MemTotal']:.4f}",
            "RAY_memory_monitor_refresh_ms": "100", "RAY_task_oom_retries": "0"}
os.environ.update(SETTINGS)

import ray  # noqa: E402  (reads the RAY_* settings above when it starts the node)

ray.init(num_cpus=2, include_dashboard=False, _temp_dir=sys.argv[1])
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
log = logging.getLogger("driver")


@ray.remote(num_cpus=1, max_retries=0)
def rollout(rank: int) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    worker_log = logging.getLogger("rollout")
    buffers = []
    for chunk in range(32):
        buffers.append(bytearray(64 * 2**20))
        worker_log.info("[Rank %d] rollout chunk %d: %d MB of KV cache", rank, chunk, 64 * len(buffers))
        time.sleep(0.1)
    return rank


log.info("starting rollout; Ray settings %s", SETTINGS)
print(ray.get([rollout.remote(0)]))
