"""Ray Train V2, 4 CPU workers: world rank 2 raises at step 5 (workers/ray_train_job.py)."""

import sys

from tests.scenarios.workers.ray_train_job import run

run(sys.argv[1], fault_rank=2, fault_step=5)
