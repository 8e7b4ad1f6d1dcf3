"""How the archive's read endpoints (the Loki API, ``/v1/query``) run a query's work: on a worker
thread under its :class:`~ranklog.query.budget.QueryBudget`, with a watcher that cancels the budget
when the client goes away, so an abandoned query stops at its next check and frees its slot."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TypeVar

import anyio
from starlette.requests import Request

from ..query import budget as query_budget
from ..query.budget import QueryBudget

DISCONNECT_POLL_S = 0.2
T = TypeVar("T")


async def watch_disconnect(request: Request, running: QueryBudget) -> None:
    """Cancel `running` when the client goes away (polled while the query works)."""
    with contextlib.suppress(asyncio.CancelledError):
        while not running.cancelled.is_set():
            if await request.is_disconnected():
                running.cancel()
                return
            await asyncio.sleep(DISCONNECT_POLL_S)


async def in_thread(running: QueryBudget, work: Callable[[], T]) -> T:
    """`work()` on a worker thread with `running` as its current budget."""

    def run() -> T:
        with query_budget.running(running):
            return work()

    return await anyio.to_thread.run_sync(run)


@contextlib.asynccontextmanager
async def watched(request: Request, running: QueryBudget):
    """While inside, `running` is cancelled if the client of `request` disconnects."""
    watcher = asyncio.ensure_future(watch_disconnect(request, running))
    try:
        yield running
    finally:
        watcher.cancel()
