"""Ray Train V2, 4 CPU workers: a clean run of 8 steps (workers/ray_train_job.py)."""

import sys

from tests.scenarios.workers.ray_train_job import run

run(sys.argv[1])
