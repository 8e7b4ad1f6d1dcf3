"""A scripted failing training job, written as ranklog JSON lines for a live agent to read.

Four ranks of job ``JOB`` log a step record every tick with allow-listed training metrics (rank 3 is
a straggler: it advances every other tick). :meth:`FailingJob.fail` then writes what a real failure
looks like: an error burst and a CUDA OOM traceback on rank 3, NCCL watchdog timeouts on the
others, and one malformed line. The ranks keep logging steps afterwards so every training panel
still has fresh data.
"""

from __future__ import annotations

import json
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

JOB = "llama-live"
RANKS = 4
FAILING_RANK = 3
HOST = "node-live"

CUDA_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total "
            "capacity of 79.10 GiB of which 1.06 GiB is free.")
NCCL_TIMEOUT = ("[Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4121, "
                "OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600012 "
                "milliseconds before timing out.")


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class FailingJob:
    def __init__(self, log_dir: Path, tick: float = 0.5) -> None:
        self.log_dir = log_dir
        self.tick = tick
        self.steps = [0] * RANKS
        self.seq = [0] * RANKS
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="failing-job", daemon=True)
        log_dir.mkdir(parents=True, exist_ok=True)

    def path(self, rank: int) -> Path:
        return self.log_dir / f"{JOB}-rank{rank}.log"

    def write(self, rank: int, level: str, msg: str, **extra: Any) -> None:
        with self._lock:
            self.seq[rank] += 1
            record = {"ts": _now(), "level": level, "msg": msg, "logger": "trainer", "host": HOST, "pid": 1000 + rank,
                      "rank": rank, "local_rank": rank, "job": JOB, "seq": self.seq[rank], **extra}
            with self.path(rank).open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")

    def _step(self, rank: int, tick: int) -> None:
        if rank == FAILING_RANK and tick % 2:
            return
        self.steps[rank] += 1
        step = self.steps[rank]
        metrics: dict[str, float] = {
            "perf/throughput": 3000.0 + 10 * rank + (step % 5), "timing_s/step": 0.5 * (2 if rank == FAILING_RANK else 1),
            "actor/pg_loss": 2.0 / (1 + 0.01 * step), "actor/grad_norm": 1.0 + 0.05 * rank,
        }
        if rank == 0:
            metrics["tokens_per_second"] = 4 * metrics["perf/throughput"]
        self.write(rank, "INFO", f"step:{step} done", step=step, **metrics)

    def _run(self) -> None:
        tick = 0
        while not self._stop.wait(self.tick):
            tick += 1
            for rank in range(RANKS):
                self._step(rank, tick)

    def start(self) -> FailingJob:
        for rank in range(RANKS):
            self.write(rank, "INFO", "training started", step=0)
        self._thread.start()
        return self

    def fail(self, burst: int = 12) -> None:
        """The failure: error burst + CUDA OOM on the failing rank, NCCL timeouts elsewhere, a bad line."""
        for i in range(burst):
            self.write(FAILING_RANK, "ERROR", f"dataloader worker {i} raised; retrying batch", step=self.steps[FAILING_RANK])
        self.write(FAILING_RANK, "ERROR", "Exception in training step", exc=f"Traceback (most recent call last):\n"
                   f"  File \"train.py\", line 212, in step\n    loss.backward()\n{CUDA_OOM}")
        for rank in range(RANKS):
            if rank != FAILING_RANK:
                self.write(rank, "ERROR", NCCL_TIMEOUT.format(rank=rank))
        with self._lock, self.path(0).open("a", encoding="utf-8") as handle:
            handle.write('{"ts": "2026-12-02T13:04:05Z", "level": "INFO", "msg": "truncated json\n')

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
