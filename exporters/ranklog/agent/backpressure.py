"""Bounded memory: read bytes waiting for acknowledgement are capped; past the cap reading pauses.

The files on disk are the buffer: pausing never drops a byte, it only delays reading. The budget is
checked before each read, so one read chunk may overshoot it by at most ``read_chunk`` bytes.
"""

from __future__ import annotations

import threading


class InflightBudget:
    def __init__(self, limit: int, paused_gauge=None) -> None:
        self.limit = limit
        self._bytes = 0
        self._lock = threading.Lock()
        self._gauge = paused_gauge
        self._paused = False

    def take(self, nbytes: int) -> None:
        with self._lock:
            self._bytes += nbytes

    def give_back(self, nbytes: int) -> None:
        with self._lock:
            self._bytes -= nbytes

    @property
    def inflight(self) -> int:
        return self._bytes

    @property
    def tight(self) -> bool:
        """Half the budget is used: what is left goes where it is needed first (see parse_pool)."""
        return self._bytes >= self.limit / 2

    def may_read(self) -> bool:
        """Whether reading may go on; updates ranklog_agent_reading_paused."""
        paused = self._bytes >= self.limit
        if paused != self._paused:
            self._paused = paused
            if self._gauge is not None:
                self._gauge.set(1 if paused else 0)
        return not paused
