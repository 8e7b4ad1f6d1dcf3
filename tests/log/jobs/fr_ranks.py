"""Two gloo ranks with ranklog's flight recorder on: ``RANK=R … python fr_ranks.py LOG_DIR``.

Both ranks run three all_reduces; then rank 1 stops joining (it sleeps, as a hung data loader does)
while rank 0 enters a fourth, which times out after 3 s and raises: rank 0 dies of the uncaught
exception, and the test stops rank 1 with SIGTERM as torchrun would.
"""

from __future__ import annotations

import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

import ranklog

ranklog.configure(log_dir=sys.argv[1], flight_recorder=True)
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=3))
tensor = torch.ones(4)
for _ in range(3):
    dist.all_reduce(tensor)
print(f"rank {dist.get_rank()} pid {os.getpid()} did 3 collectives", flush=True)
if dist.get_rank() == 1:
    time.sleep(600)
dist.all_reduce(tensor)
