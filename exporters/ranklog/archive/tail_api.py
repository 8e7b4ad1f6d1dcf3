"""``POST /v1/tail``: ``ranklog query --follow`` against a running archive.

The body is ``{"spec": QuerySpec.to_dict(), "columns": [...], "tail": N}``; the answer is an Arrow IPC
stream that never ends on its own: the last N matching records, then every new one as the archive
stores it (:func:`ranklog.query.follow.follow` runs here, next to the data), with an empty batch
after each look that found nothing — a heartbeat that keeps proxies from closing an idle stream and
lets the server notice a client that left. Same bearer tokens as ``/v1/query``; at most
:data:`MAX_TAILS` follows at once (429 with ``Retry-After`` beyond that).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ..errors import UserError
from ..query import engine
from ..query.filters import QuerySpec
from ..query.follow import follow
from ..query.remote import ARROW_STREAM
from ..query.sources import ArchiveSource
from .query_api import _ArrowBytes

MAX_TAILS = 8
MAX_TAIL_RECORDS = 10_000


def _request(body: Any) -> tuple[QuerySpec, list[str], int]:
    if not isinstance(body, dict):
        raise UserError("the body must be a JSON object")
    spec = QuerySpec.from_dict({} if body.get("spec") is None else body["spec"])
    columns = engine.check_columns(body.get("columns"))
    tail = body.get("tail", 10)
    if isinstance(tail, bool) or not isinstance(tail, int) or not 0 <= tail <= MAX_TAIL_RECORDS:
        raise UserError(f"tail: expected a whole number from 0 to {MAX_TAIL_RECORDS}")
    return spec, columns, tail


class TailEndpoint:
    """The ``/v1/tail`` handler over the archive at ``root(request)``."""

    def __init__(self, root: Callable[[Request], str], authorize: Callable[[Request], Response | None]) -> None:
        self.root = root
        self.authorize = authorize
        self._slots = threading.BoundedSemaphore(MAX_TAILS)

    async def handle(self, request: Request) -> Response:
        denied = self.authorize(request)
        if denied is not None:
            return denied
        try:
            spec, columns, tail = _request(json.loads(await request.body() or b"{}"))
        except ValueError as exc:  # UserError is one
            return JSONResponse({"error": str(exc) if isinstance(exc, UserError) else "the body is not JSON"},
                                status_code=400)
        if not self._slots.acquire(blocking=False):
            return JSONResponse({"error": f"too many follows running (limit {MAX_TAILS})"}, status_code=429,
                                headers={"Retry-After": "5"})
        try:
            source = await run_in_threadpool(ArchiveSource.open, self.root(request),
                                             getattr(request.app.state, "s3", None))
        except UserError as exc:
            self._slots.release()
            return JSONResponse({"error": str(exc)}, status_code=400)
        stop = threading.Event()
        batches = follow(source, spec, columns, tail, stop=stop, heartbeat=True)

        def body() -> Iterator[bytes]:
            arrow = _ArrowBytes(engine.schema_of(columns))
            try:
                yield arrow.sink.drain()  # the schema at once: the client knows the columns before a record
                for batch in batches:
                    yield arrow.write(batch)
                yield arrow.finish()
            finally:
                stop.set()
                batches.close()
                self._slots.release()

        return StreamingResponse(body(), media_type=ARROW_STREAM)
