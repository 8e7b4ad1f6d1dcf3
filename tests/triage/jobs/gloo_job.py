"""A real 4-rank CPU job (torch + gloo) for triage tests: `torchrun … gloo_job.py raise|hang|ok`.

Rank 1 misbehaves at step 3: `raise` raises an uncaught exception (the others then lose their
peer in the next allreduce); `hang` sleeps instead of joining the allreduce (the others time out
after the 5 s collective timeout; torchrun then stops rank 1). `ok` trains to the end.
"""

from __future__ import annotations

import datetime
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

STEPS = 5
BAD_RANK = 1
BAD_STEP = 3


@record
def main() -> None:
    mode = sys.argv[1]
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=5))
    rank = dist.get_rank()
    weights = torch.zeros(8)
    for step in range(1, STEPS + 1):
        grad = torch.randn(8)
        if rank == BAD_RANK and step == BAD_STEP:
            if mode == "raise":
                raise ValueError("label index 1024 is out of range for 1000 classes in batch 17")
            if mode == "hang":
                time.sleep(120)  # stuck (a dead data loader); never joins the allreduce
        dist.all_reduce(grad)
        weights -= 0.01 * grad / dist.get_world_size()
        print(f"step {step} loss {float(weights.norm()):.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
