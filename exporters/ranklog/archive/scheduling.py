"""Background work yields the CPU to ingest: the flush and maintenance threads run niced.

An ACK waits for decode, dedup and the WAL fsync; the Parquet flush and compaction behind it can
wait. Linux schedules threads as tasks, so ``setpriority(PRIO_PROCESS, <thread id>, n)`` lowers one
thread (nice 10 ≈ a tenth of a nice-0 thread's share when both want the core) and leaves the
request threads alone — the same split as RocksDB's low-priority compaction pool. Under sustained
overload the flush still gets its share plus every idle moment, and ``max_pending_bytes`` turns a
growing backlog into 503s, so ACKed data never piles up without bound. Measured in
tests/benchmarks/bench_archive.py (ACK rate with and without). ``background_nice: 0`` turns it off.
"""

from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger("ranklog.archive.scheduling")


def lower_current_thread(niceness: int) -> None:
    """Add `niceness` to the calling thread's nice value (Linux; a no-op elsewhere or when 0)."""
    if niceness <= 0 or not hasattr(os, "setpriority"):
        return
    tid = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + niceness))
    except OSError as exc:
        log.warning("could not lower the priority of %s: %s", threading.current_thread().name, exc)
