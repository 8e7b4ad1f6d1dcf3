"""Memory is a budget: what ingest holds in flight is charged while it is read and decoded.

A request's memory is its body, the decoded body, the objects a decoder makes of it and the record
table. Each is charged to the request's :class:`Charge` *before* it is made, from what is already
known: body bytes as they arrive, decompressed bytes chunk by chunk (so a gzip bomb stops at the
budget, not at its end), and, before a decoder expands the data into Python objects, an estimate
from cheap counts of the decoded bytes (lines, ``{``/``[``, protobuf entries walked on the wire,
msgpack items as they are read) times the measured cost of a record. The estimate is replaced by
the record table's real size once it exists, and everything is released when the request ends.

Limits (``archive_config``): the whole process (``ingest_memory_budget``), each token
(``ingest_memory_per_token``, so one client cannot take it all) and each request's records
(``max_request_records``). A request that alone needs more than its token's share — or has more
records than the cap — can never succeed: 413, the sender must split it. One that would fit but
finds the budget held by others gets 429 with ``Retry-After``. Both are counted in
``ranklog_archive_rejected_requests_total`` (reasons ``too_large``, ``too_many_records``,
``memory_budget``); ``ranklog_archive_ingest_memory_bytes`` is what is charged right now.

The costs are measured (``tests/benchmarks/bench_ingest_bombs.py`` prints them): a record decoded
through Python objects (NDJSON, JSON arrays, msgpack, OTLP, Loki) costs ~1.1 KB even when empty plus
~6 bytes per decoded byte (its strings as values, keys and row fields); protobuf decoders go
through a JSON-shaped dict as well, about twice that. Arrow IPC is columnar: the stream and its
conformed copy.
"""

from __future__ import annotations

import threading

from .ingest_error import IngestError

ROW_COST = 1100  # bytes of Python objects per record on the Python decoders (an empty record)
BYTE_FACTOR = 6  # bytes of Python objects per decoded byte on those decoders
PROTOBUF_FACTOR = 2  # protobuf decoders make a JSON-shaped dict first, then the rows
ARROW_FACTOR = 2  # the decoded stream's tables and the conformed copy


class OverBudget(IngestError):
    """413 (the request alone is too big) or 429 (the budget is held by others: retry)."""


class IngestBudget:
    """The process-wide ingest memory budget, shared by every request (thread-safe)."""

    def __init__(self, total: int, per_token: int, max_records: int, gauge=None) -> None:
        self.total = total
        self.per_token = min(per_token, total)
        self.max_records = max_records
        self._gauge = gauge
        self._lock = threading.Lock()
        self._held = 0
        self._by_token: dict[str, int] = {}

    @property
    def held(self) -> int:
        return self._held

    def open(self, client: str) -> Charge:
        """The charge of one request by `client` (a key naming the token, never the token)."""
        return Charge(self, client)

    def _take(self, charge: Charge, nbytes: int, what: str) -> None:
        with self._lock:
            token = self._by_token.get(charge.client, 0)
            if charge.held + nbytes > self.per_token:
                raise OverBudget(413, "too_large", f"{what}: this request needs more than the per-token ingest memory "
                                 f"budget ({_mib(self.per_token)}; about {_mib(charge.held + nbytes)} so far): send "
                                 "smaller batches")
            if token + nbytes > self.per_token or self._held + nbytes > self.total:
                whose = "this token's" if token + nbytes > self.per_token else "the archive's"
                raise OverBudget(429, "memory_budget", f"{what}: {whose} ingest memory budget is in use by other "
                                 "requests; retry shortly")
            self._held += nbytes
            self._by_token[charge.client] = token + nbytes
            self._publish()
        charge.held += nbytes

    def _give(self, charge: Charge, nbytes: int) -> None:
        nbytes = min(nbytes, charge.held)
        if nbytes <= 0:
            return
        with self._lock:
            self._held -= nbytes
            left = self._by_token.get(charge.client, 0) - nbytes
            if left > 0:
                self._by_token[charge.client] = left
            else:
                self._by_token.pop(charge.client, None)
            self._publish()
        charge.held -= nbytes

    def _publish(self) -> None:
        if self._gauge is not None:
            self._gauge.set(self._held)


class Charge:
    """What one request holds. ``add`` before making something, ``give_back`` once it is gone."""

    def __init__(self, budget: IngestBudget | None, client: str = "") -> None:
        self.budget = budget
        self.client = client
        self.held = 0

    @property
    def limited(self) -> bool:
        return self.budget is not None

    def add(self, nbytes: int, what: str = "request") -> None:
        if self.budget is not None and nbytes > 0:
            self.budget._take(self, int(nbytes), what)

    def give_back(self, nbytes: int) -> None:
        if self.budget is not None:
            self.budget._give(self, int(nbytes))

    def records(self, count: int, what: str = "request") -> None:
        """`count` records are about to be made: refuse past the per-request cap (413)."""
        if self.budget is not None and count > self.budget.max_records:
            raise OverBudget(413, "too_many_records", f"{what}: more than {self.budget.max_records} records in one "
                             "request (max_request_records): send smaller batches")

    def estimate(self, objects: int, decoded_bytes: int, what: str, factor: int = 1) -> None:
        """Charge what a Python decoder will make of `decoded_bytes` holding up to `objects` objects
        (records, JSON objects and arrays, msgpack containers); given back when the table exists."""
        self.add(factor * (objects * ROW_COST + decoded_bytes * BYTE_FACTOR), what)

    def count_limit(self, factor: int = 1) -> int:
        """Where counting records may stop: one past what this request could hold (cap or budget)."""
        if not self.limited:
            return 1 << 62
        affordable = max(0, self.budget.per_token - self.held) // (factor * ROW_COST)
        return min(self.budget.max_records, affordable) + 1

    def close(self) -> None:
        self.give_back(self.held)

    def __enter__(self) -> Charge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


UNLIMITED = Charge(None)  # WAL replay and tools: what was accepted once is decoded again, whatever it costs


def _mib(nbytes: int) -> str:
    return f"{nbytes / 1024**2:,.0f} MiB"
