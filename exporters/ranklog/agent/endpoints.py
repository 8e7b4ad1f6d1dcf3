"""Archive endpoints: stable spreading by source, fail-over, exponential backoff with jitter.

A source always prefers the same endpoint (crc32 of its source_id modulo the number of endpoints),
so one file's records land on one archive while it is healthy. An endpoint that fails is skipped
until its backoff expires: ``min(backoff_max, backoff_initial * 2**failures)`` scaled by a random
factor in [0.5, 1) ("equal jitter", so a fleet of agents does not retry in lockstep), or exactly the
server's ``Retry-After`` when it sent one. A 401/403 disables the endpoint for
``unauthorized_retry`` seconds and is logged as an ERROR each time: a wrong token is an operator
problem, not a transient one, but it may be fixed without restarting the agent (the token file is
re-read before every retry).
"""

from __future__ import annotations

import logging
import random
import threading
import time
import zlib
from dataclasses import dataclass

log = logging.getLogger("ranklog.agent.ship")


@dataclass
class Endpoint:
    url: str
    failures: int = 0
    available_at: float = 0.0  # monotonic
    unauthorized: bool = False


class Endpoints:
    def __init__(self, urls: list[str], backoff_initial: float, backoff_max: float, unauthorized_retry: float) -> None:
        self.items = [Endpoint(url.rstrip("/")) for url in urls]
        self._initial = backoff_initial
        self._max = backoff_max
        self._unauthorized_retry = unauthorized_retry
        self._lock = threading.Lock()

    def preferred(self, source_id: str) -> int:
        return zlib.crc32(source_id.encode()) % len(self.items)

    def choose(self, preferred: int, now: float | None = None) -> tuple[int | None, float]:
        """The first available endpoint from `preferred` on, or (None, seconds until one is)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            count = len(self.items)
            for step in range(count):
                index = (preferred + step) % count
                if self.items[index].available_at <= now:
                    return index, 0.0
            return None, min(e.available_at for e in self.items) - now

    def succeeded(self, index: int) -> None:
        with self._lock:
            endpoint = self.items[index]
            if endpoint.unauthorized:
                log.warning("archive %s accepts our token again; shipping to it resumes", endpoint.url)
            endpoint.failures, endpoint.available_at, endpoint.unauthorized = 0, 0.0, False

    def failed(self, index: int, retry_after: float | None = None) -> float:
        """Back `index` off; returns the delay chosen."""
        with self._lock:
            endpoint = self.items[index]
            endpoint.failures += 1
            if retry_after is not None:
                delay = min(max(retry_after, 0.0), self._max * 4)
            else:
                delay = min(self._max, self._initial * 2 ** min(endpoint.failures - 1, 30)) * random.uniform(0.5, 1.0)
            endpoint.available_at = time.monotonic() + delay
            return delay

    def refused_token(self, index: int) -> None:
        with self._lock:
            endpoint = self.items[index]
            endpoint.unauthorized = True
            endpoint.failures += 1
            endpoint.available_at = time.monotonic() + self._unauthorized_retry
        log.error("archive %s refused our token (401/403): not shipping to it; retrying in %.0fs "
                  "(tailing state is kept, nothing is dropped)", endpoint.url, self._unauthorized_retry)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None
