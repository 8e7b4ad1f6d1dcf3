"""``GET/POST /v1/query``: the archive answers queries over its own root, streaming the result.

- Auth: the archive's own bearer-token check (``app.authorize``: same tokens, same 401, counted in
  ``ranklog_archive_rejected_requests_total``). Mounted by ``app.routes()`` as ``QueryEndpoint(root, app.authorize)``;
  :func:`query_route` serves a bare root without the ingest side.
- ``POST`` takes JSON ``{"spec": QuerySpec.to_dict(), "columns": [...], "format": "arrow"|"ndjson",
  "count": false}``; ``GET`` takes the CLI's filter names as query parameters (``?level=ERROR&host=a
  &rank=0-7&since=2h&columns=ts,msg&format=ndjson``) so ``curl`` works.
- The answer streams as Arrow IPC (``application/vnd.apache.arrow.stream``, the CLI's choice) or
  NDJSON (``application/x-ndjson``, GET's default), batch by batch from the engine, so neither side
  holds the result in memory. ``{"count": true}`` answers ``{"count": N}``.
- Server-side limits (:class:`QueryLimits`): at most ``max_rows`` rows per answer (the header
  ``X-Ranklog-Row-Limit`` tells the client, which warns when it hits it) and ``max_concurrent``
  queries at once (429 with ``Retry-After`` beyond that), so queries cannot starve ingest; each
  query runs under a :class:`~ranklog.query.budget.QueryBudget` (``budget``): past its time limit
  or memory it stops (504 / 400 before the first byte; afterwards the stream ends early, without
  the end-of-stream marker, so the client sees a broken answer, never a short one), and a client
  that goes away cancels it (:mod:`.query_work`), giving its slot back.
- Errors found before the first byte (bad filter, bad regex) are a 400 with ``{"error": …}``.
- Archive files that are not readable Parquet are skipped (the engine warns naming them); the answer
  holds the rest and names them in the header ``X-Ranklog-Unreadable-Files`` (JSON ``{path: why}``;
  ``unreadable_files`` in a count's answer), which the CLI prints as a warning.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ..errors import UserError
from ..query import engine
from ..query.budget import BudgetLimits, QueryAborted, QueryBudget
from ..query.filter_flags import spec_from_args
from ..query.filters import QuerySpec
from ..query.outputs import json_lines
from ..query.remote import ARROW_STREAM, ROW_LIMIT_HEADER, WARNINGS_HEADER
from ..query.sources import ArchiveSource
from ..record import arrow_schema
from .query_work import in_thread, watched
from .request_body import BodyRefused, read_body

NDJSON = "application/x-ndjson"
_GET_LISTS = ("levels", "host", "ip", "pid", "rank", "job", "trace_id", "logger", "attr")
_GET_SCALARS = ("start", "end", "since", "level", "step_min", "step_max", "contains", "regex", "limit", "sort")


@dataclass(frozen=True)
class QueryLimits:
    max_rows: int = 1_000_000
    max_concurrent: int = 4
    # An export of the whole archive legitimately runs for minutes: /v1/query's default time limit
    # is 10 min (the archive's `query.timeout` when mounted by the app), its memory the same budget.
    budget: BudgetLimits = field(default_factory=lambda: BudgetLimits(timeout_s=600.0))


def _spec_from_params(request: Request) -> tuple[QuerySpec, list[str] | None, str, bool]:
    params = request.query_params
    unknown = set(params) - set(_GET_LISTS) - set(_GET_SCALARS) - {"columns", "format", "count", "ignore_case"}
    if unknown:
        raise UserError(f"unknown query parameter(s): {', '.join(sorted(unknown))}")
    values: dict[str, Any] = {name: params.getlist(name) or None for name in _GET_LISTS}
    values.update({name: params.get(name) for name in _GET_SCALARS})
    values["ignore_case"] = params.get("ignore_case", "").lower() in ("1", "true", "yes")
    spec = spec_from_args(argparse.Namespace(**values))
    columns = [c for c in params.get("columns", "").split(",") if c] or None
    return spec, columns, params.get("format", "ndjson"), params.get("count", "").lower() in ("1", "true", "yes")


async def _spec_from_body(request: Request) -> tuple[QuerySpec, list[str] | None, str, bool]:
    try:
        body = json.loads(await read_body(request) or b"{}")
    except ValueError:
        raise UserError("the body is not JSON") from None
    except RecursionError:
        raise UserError("the body is JSON nested too deeply") from None
    if not isinstance(body, dict):
        raise UserError("the body must be a JSON object")
    try:
        spec = QuerySpec.from_dict({} if body.get("spec") is None else body["spec"])
    except RecursionError:
        raise UserError("the query spec is nested too deeply") from None
    columns = body.get("columns")
    if columns is not None and not (isinstance(columns, list) and all(isinstance(c, str) for c in columns)):
        raise UserError("columns: expected a list of column names")
    return spec, columns, str(body.get("format", "arrow")), bool(body.get("count", False))


class _Chunks:
    """A write-only file collecting what the Arrow IPC writer produces, drained after each batch."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        self.closed = True

    def drain(self) -> bytes:
        out = b"".join(self.parts)
        self.parts.clear()
        return out


class QueryEndpoint:
    """The ``/v1/query`` handler over the archive at ``root(request)``, with its own concurrency slots."""

    def __init__(self, root: Callable[[Request], str], authorize: Callable[[Request], Response | None],
                 limits: QueryLimits | None = None) -> None:
        self.root = root
        self.authorize = authorize
        self.limits = limits or QueryLimits()
        self._slots = threading.BoundedSemaphore(self.limits.max_concurrent)
        self._opened: dict[tuple, ArchiveSource] = {}

    def _source(self, root: str, s3) -> ArchiveSource:
        """The archive to query; an object-store root is opened once (resolving credentials and
        building its S3 client costs tens of milliseconds), a local one on every request."""
        if "://" not in root:
            return ArchiveSource.open(root, s3)
        key = (root, s3)
        if key not in self._opened:
            self._opened[key] = ArchiveSource.open(root, s3)
        return self._opened[key]

    async def handle(self, request: Request) -> Response:
        import pyarrow as pa

        denied = self.authorize(request)
        if denied is not None:
            return denied
        try:
            if request.method == "GET":
                spec, columns, fmt, count_only = _spec_from_params(request)
            else:
                spec, columns, fmt, count_only = await _spec_from_body(request)
            if fmt not in ("arrow", "ndjson"):
                raise UserError(f"format must be arrow or ndjson, not {fmt!r}")
            selected = engine.check_columns(columns)
        except UserError as exc:
            return _error(400, str(exc))
        except BodyRefused as exc:
            return _error(exc.status, str(exc), Connection="close")
        if not self._slots.acquire(blocking=False):
            return _error(429, f"too many queries running (limit {self.limits.max_concurrent})", **{"Retry-After": "1"})
        running = QueryBudget(self.limits.budget)
        batches: Iterator[Any] | None = None
        schema = pa.schema([arrow_schema().field(name) for name in selected])
        writer = _ArrowBytes(schema) if fmt == "arrow" else None

        def pull() -> bytes | None:
            """The next piece of the answer (None at the end), checked against the budget."""
            running.check()
            batch = next(batches, None) if batches is not None else None
            if batch is None:
                return writer.finish() if writer is not None else None
            return writer.write(batch) if writer is not None else _ndjson_bytes(batch)

        try:
            async with watched(request, running):
                source = await in_thread(running, lambda: self._source(self.root(request),
                                                                        getattr(request.app.state, "s3", None)))
                if count_only:
                    total = await in_thread(running, lambda: engine.count(source, spec))
                    self._slots.release()
                    return JSONResponse({"count": total, **({"unreadable_files": source.unreadable}
                                                            if source.unreadable else {})})
                cap = self.limits.max_rows
                capped = dataclasses.replace(spec, limit=min(spec.limit if spec.limit is not None else cap, cap))
                batches = engine.scan(source, capped, selected)
                first = await in_thread(running, pull)
        except (UserError, QueryAborted) as exc:
            self._slots.release()
            return _error(getattr(exc, "status", 400), str(exc))
        except pa.ArrowInvalid as exc:  # a filter Arrow cannot evaluate (e.g. a host glob RE2 rejects)
            self._slots.release()
            return _error(400, f"bad query: {str(exc).splitlines()[0]}")
        except BaseException:
            self._slots.release()
            raise

        async def body():
            piece = first
            while piece is not None:
                if piece:
                    yield piece
                if writer is not None and writer.finished:
                    return
                try:
                    piece = await in_thread(running, pull)
                except QueryAborted:
                    return  # the answer ends without its end-of-stream marker: the client sees it broken

        def done() -> None:
            assert batches is not None
            batches.close()
            self._slots.release()

        headers = {ROW_LIMIT_HEADER: str(self.limits.max_rows)}
        if source.unreadable:  # answered with the rest (the engine skipped them, naming each in the log)
            headers[WARNINGS_HEADER] = json.dumps(source.unreadable)
        return _Answer(body(), done, media_type=ARROW_STREAM if fmt == "arrow" else NDJSON, headers=headers)


class _Answer(StreamingResponse):
    """A streamed answer that always runs `done` once it is over, sent or not (a client gone before
    the first byte never starts the body, whose own cleanup would then never run)."""

    def __init__(self, content: Any, done: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self._done = done

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await anyio.to_thread.run_sync(self._done)


class _ArrowBytes:
    """An Arrow IPC stream written batch by batch: the schema with the first piece, the end-of-stream
    marker only from :meth:`finish` (a stream cut short lacks it, and readers say so)."""

    def __init__(self, schema: Any) -> None:
        import pyarrow as pa

        self.sink = _Chunks()
        self.writer = pa.ipc.new_stream(self.sink, schema)
        self.finished = False

    def write(self, batch: Any) -> bytes:
        self.writer.write_batch(batch)
        return self.sink.drain()

    def finish(self) -> bytes:
        self.writer.close()
        self.finished = True
        return self.sink.drain()


def _ndjson_bytes(batch: Any) -> bytes:
    if not batch.num_rows:
        return b""
    return ("\n".join(json_lines(batch).to_pylist()) + "\n").encode()


def _error(status: int, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers or None)


def query_route(root: str, authorized: Callable[[Request], bool], limits: QueryLimits | None = None,
                path: str = "/v1/query") -> Route:
    """A standalone ``/v1/query`` route over `root` (tools and tests without the ingest side)."""

    def authorize(request: Request) -> Response | None:
        if authorized(request):
            return None
        return _error(401, "missing or invalid bearer token", **{"WWW-Authenticate": "Bearer"})

    return Route(path, QueryEndpoint(lambda _: root, authorize, limits).handle, methods=["GET", "POST"])
