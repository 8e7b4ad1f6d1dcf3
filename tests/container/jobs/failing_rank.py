"""A stand-in training process for the end-to-end test: it logs steps, then fails like a real job.

The rank named by FAIL_RANK hits a CUDA OOM; every other rank then reports the NCCL watchdog
timeout that follows a peer's death. Exit codes match: 1 for the OOM rank, 134 (abort) for the rest.
The failing rank logs its OOM twice, PAUSE seconds apart (a retrying loader): a Prometheus started
minutes ago can only see a counter *increase*, never a series that was born with the failure.
"""

from __future__ import annotations

import os
import sys
import time

RANK = int(os.environ["RANK"])
FAIL_RANK = int(os.environ.get("FAIL_RANK", "3"))
PAUSE = float(os.environ.get("PAUSE", "8"))
OOM = (
    "Traceback (most recent call last):\n"
    '  File "/workspace/train.py", line 88, in <module>\n'
    "    loss = model(batch).loss\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity "
    "of 79.15 GiB of which 1.02 GiB is free."
)
WATCHDOG = (
    "[rank{rank}]:[E1202 12:00:{sec:02d}.000000000 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=4242, OpType=ALLREDUCE, NumelIn=1048576, "
    "NumelOut=1048576, Timeout(ms)=600000) ran for 600015 milliseconds before timing out."
)


def main() -> int:
    for step in range(1, 4):
        print(f"step:{step} - actor/pg_loss:{0.5 / step:.3f} - perf/throughput:{1000 + RANK}", flush=True)
        time.sleep(0.2)
    if RANK == FAIL_RANK:
        print(OOM, file=sys.stderr, flush=True)
        time.sleep(PAUSE)
        print(OOM, file=sys.stderr, flush=True)
        return 1
    time.sleep(PAUSE + 2)
    print(WATCHDOG.format(rank=RANK, sec=10 + RANK), file=sys.stderr, flush=True)
    return 134


if __name__ == "__main__":
    sys.exit(main())
