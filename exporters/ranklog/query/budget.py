"""What one query may cost a running archive: time, memory, series, and its client's attention.

A :class:`QueryBudget` travels with a query served over HTTP (the Loki API, ``/v1/query``):

- **time**: past ``timeout_s`` the query stops at its next check (:class:`QueryTimeout`; Loki's 504);
- **cancellation**: the HTTP layer calls :meth:`QueryBudget.cancel` when the client goes away, and
  the query stops at its next check (:class:`QueryCancelled`), giving its slot back;
- **memory**: what the evaluation holds (tables it sorts, collected lines, series arrays, samples)
  is charged with :meth:`charge` and released when freed; past ``memory_bytes``
  :class:`QueryTooLarge` (Loki's "query would read too many bytes", a 400 the client must act on).
  A process-wide guard stops any query that finds Arrow's allocations past ``process_arrow_bytes``
  (several queries together, or memory this accounting does not see);
- **series**: Loki's ``max_query_series`` (:class:`SeriesLimit`, Loki's message and 400).

Checks are cooperative: the engine calls :func:`check` between record batches (at most
``engine.BATCH_ROWS`` rows apart) and the evaluators inside their loops, so a query stops within a
batch's work of its deadline. The budget of the query running on a thread is found with
:func:`current` (a context variable set by :func:`running`), so the engine needs no new parameter.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from ..errors import UserError

DEFAULT_TIMEOUT_S = 60.0  # Loki's query_timeout default is 1m
DEFAULT_MEMORY_BYTES = 256 << 20
DEFAULT_MAX_SERIES = 500  # Loki's max_query_series default
DEFAULT_PROCESS_ARROW_BYTES = 1 << 30


class QueryAborted(UserError):
    """A query stopped by its budget; ``status`` is the HTTP answer."""

    status = 400


class QueryTimeout(QueryAborted):
    status = 504


class QueryCancelled(QueryAborted):
    status = 499


class QueryTooLarge(QueryAborted):
    status = 400


class SeriesLimit(QueryAborted):
    status = 400


@dataclass(frozen=True)
class BudgetLimits:
    timeout_s: float = DEFAULT_TIMEOUT_S
    memory_bytes: int = DEFAULT_MEMORY_BYTES
    max_series: int = DEFAULT_MAX_SERIES
    process_arrow_bytes: int = DEFAULT_PROCESS_ARROW_BYTES


class QueryBudget:
    def __init__(self, limits: BudgetLimits | None = None) -> None:
        self.limits = limits or BudgetLimits()
        self.started = time.monotonic()
        self.deadline = self.started + self.limits.timeout_s
        self.cancelled = threading.Event()
        self.held = 0
        self.peak = 0
        self._lock = threading.Lock()

    # -- the client and the clock -----------------------------------------------------------------
    def cancel(self) -> None:
        self.cancelled.set()

    def check(self) -> None:
        if self.cancelled.is_set():
            raise QueryCancelled("the request was cancelled by the client")
        if time.monotonic() > self.deadline:
            raise QueryTimeout(f"request timed out after {self.limits.timeout_s:g}s, decrease the duration of the "
                               "request or add more label matchers (prefer exact match over regex match) to reduce "
                               "the amount of data processed")
        _check_process_memory(self.limits.process_arrow_bytes)

    # -- memory -------------------------------------------------------------------------------------------
    def charge(self, nbytes: int, what: str = "the query") -> None:
        with self._lock:
            self.held += max(0, int(nbytes))
            self.peak = max(self.peak, self.held)
            over = self.held > self.limits.memory_bytes
        if over:
            raise QueryTooLarge(f"query would use more than {self.limits.memory_bytes >> 20} MiB of memory "
                                f"({what}); narrow the time range or the selector, or aggregate "
                                "(sum by (…), | keep …) to reduce it")
        self.check()

    def release(self, nbytes: int) -> None:
        with self._lock:
            self.held = max(0, self.held - max(0, int(nbytes)))

    @contextlib.contextmanager
    def holding(self, nbytes: int, what: str) -> Iterator[None]:
        self.charge(nbytes, what)
        try:
            yield
        finally:
            self.release(nbytes)

    # -- series -------------------------------------------------------------------------------------------
    def check_series(self, count: int) -> None:
        if count > self.limits.max_series:
            raise SeriesLimit(f"maximum number of series ({self.limits.max_series}) reached for a single query; "
                              "consider reducing query cardinality by adding more specific stream selectors, "
                              "reducing the time range, or aggregating results with functions like sum(), count() "
                              "or topk()")


def _check_process_memory(limit: int) -> None:
    import pyarrow as pa

    allocated = pa.total_allocated_bytes()
    if allocated > limit:
        raise QueryTooLarge(f"the archive's queries hold {allocated >> 20} MiB of memory together (limit "
                            f"{limit >> 20} MiB); retry when fewer run")


_CURRENT: contextvars.ContextVar[QueryBudget | None] = contextvars.ContextVar("ranklog_query_budget", default=None)


def current() -> QueryBudget | None:
    return _CURRENT.get()


def check() -> None:
    """The running query's budget check (nothing outside a budgeted query)."""
    budget = _CURRENT.get()
    if budget is not None:
        budget.check()


@contextlib.contextmanager
def running(budget: QueryBudget | None) -> Iterator[QueryBudget | None]:
    """Make `budget` the current one for the code run inside (on this thread)."""
    token = _CURRENT.set(budget)
    try:
        yield budget
    finally:
        _CURRENT.reset(token)
