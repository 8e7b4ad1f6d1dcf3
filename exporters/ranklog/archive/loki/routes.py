"""The Loki-compatible read API of the archive, for Grafana's Loki datasource and Explore.

``GET|POST /loki/api/v1/query_range``, ``/query``, ``/labels`` (and ``/label``),
``/label/<name>/values``, ``/series``, ``/index/stats``: Loki's parameters and response shapes
(Loki's HTTP API reference; the shapes are checked by ``tests/archive/loki_schema.json``), over
the archive's own root through the query engine. Same bearer tokens as ingest (Grafana sends
``Authorization: Bearer …`` as a custom header). POST bodies are ``application/x-www-form-urlencoded``.

Errors are Loki's: a 400 with the message as ``text/plain`` (``parse error at line 1, col 7: …``,
``max entries limit per query exceeded …``); 429 with ``Retry-After`` past
:data:`MAX_CONCURRENT` queries. ``/query`` answers metric queries only, as Loki does.
``/tail`` is Loki's WebSocket (Grafana's live tailing): every second it sends the records that
arrived since the last message, ``{"streams": […], "dropped_entries": null}``, from ``start``
(default one hour ago) up to ``delay_for`` seconds (≤ 5) before now, ``limit`` per message, at most
:data:`MAX_TAILS` at once; the handshake is refused (403) without a valid token.
Not served: ``index/volume``, ``patterns``, ``detected_*`` (Grafana copes with their 404: Explore then
computes the log volume with a ``count_over_time`` query instead).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MultiDict
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from ...errors import UserError
from ...query import engine
from ...query.logql import STREAM_LABELS, LogQLError, LogSelector, parse, parse_selector
from ...query.logql_spec import to_spec
from ...query.sources import ArchiveSource
from ..request_body import BodyRefused, read_body
from . import evaluate
from .params import (
    LABELS_RANGE_DEFAULT_NS,
    QUERY_RANGE_DEFAULT_NS,
    BadParameter,
    duration_param,
    forward_param,
    limit_param,
    step_param,
    time_param,
    time_range,
)

MAX_CONCURRENT = 4
MAX_FIELDS = 10_000  # form fields of a POST body (each match[] of /series is one)
MAX_TAILS = 8
TAIL_INTERVAL_S = 1.0
PREFIX = "/loki/api/v1"


def _number(value: float) -> str:
    """A sample value as Loki writes it (Go's shortest 'f' formatting)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _seconds(ns: int) -> int | float:
    return ns // 10**9 if ns % 10**9 == 0 else ns / 1e9


def success(data: Any, status: int = 200) -> JSONResponse:
    return JSONResponse({"status": "success", "data": data}, status_code=status)


def loki_error(status: int, message: str, **headers: str) -> PlainTextResponse:
    """Loki's error answer: the message alone, as text/plain."""
    return PlainTextResponse(message, status_code=status, headers=headers or None)


class LokiAPI:
    """The routes of the Loki read API over the archive at ``root(request)``."""

    def __init__(self, root: Callable[[Request], str], authorize: Callable[[Request], Response | None]) -> None:
        self.root = root
        self.authorize = authorize
        self._slots = threading.BoundedSemaphore(MAX_CONCURRENT)
        self._tails = 0

    def routes(self) -> list[Route]:
        both = ["GET", "POST"]
        return [
            Route(f"{PREFIX}/query_range", self._endpoint(self.query_range), methods=both),
            Route(f"{PREFIX}/query", self._endpoint(self.query), methods=both),
            Route(f"{PREFIX}/labels", self._endpoint(self.labels), methods=both),
            Route(f"{PREFIX}/label", self._endpoint(self.labels), methods=both),
            Route(PREFIX + "/label/{name}/values", self._endpoint(self.label_values), methods=both),
            Route(f"{PREFIX}/series", self._endpoint(self.series), methods=both),
            Route(f"{PREFIX}/index/stats", self._endpoint(self.index_stats), methods=both),
            WebSocketRoute(f"{PREFIX}/tail", self.tail),
        ]

    def _endpoint(self, work: Callable[[ArchiveSource, MultiDict, Request], Response]) -> Callable:
        async def handle(request: Request) -> Response:
            denied = self.authorize(request)
            if denied is not None:
                return denied
            try:
                params = await _params(request)
            except BodyRefused as exc:
                return loki_error(exc.status, str(exc), Connection="close")
            if not self._slots.acquire(blocking=False):
                return loki_error(429, f"too many outstanding requests (limit {MAX_CONCURRENT})", **{"Retry-After": "1"})
            try:
                source = await run_in_threadpool(ArchiveSource.open, self.root(request))
                return with_warnings(await run_in_threadpool(work, source, params, request), source)
            except (LogQLError, UserError) as exc:
                return loki_error(400, str(exc))
            finally:
                self._slots.release()

        return handle

    async def tail(self, websocket: WebSocket) -> None:
        import asyncio

        if self.authorize(websocket) is not None:  # type: ignore[arg-type]  # headers and app are all it reads
            await websocket.close(code=1008)
            return
        params = websocket.query_params
        try:
            selector = parse_selector(params.get("query") or "")
            limit = limit_param(params)
            delay = min(duration_param(params, "delay_for") or 0, 5 * 10**9)
            now_ns = time.time_ns()
            last = time_param(params, "start", now_ns - QUERY_RANGE_DEFAULT_NS, now_ns)
        except (LogQLError, UserError) as exc:
            await websocket.close(code=1008, reason=str(exc)[:120])
            return
        if self._tails >= MAX_TAILS:
            await websocket.close(code=1013, reason=f"too many tails (limit {MAX_TAILS})")
            return
        self._tails += 1
        await websocket.accept()
        try:
            source = await run_in_threadpool(ArchiveSource.open, self.root(websocket))  # type: ignore[arg-type]
            while True:
                until = time.time_ns() - delay
                if until > last:
                    found = await run_in_threadpool(evaluate.log_streams, source, selector, last, until, limit, True)
                    if found.entries:
                        await websocket.send_json({"streams": found.streams, "dropped_entries": None})
                        last = max(int(ts) for stream in found.streams for ts, _ in stream["values"]) + 1
                with contextlib.suppress(asyncio.TimeoutError):
                    message = await asyncio.wait_for(websocket.receive(), TAIL_INTERVAL_S)
                    if message["type"] == "websocket.disconnect":
                        return
        except WebSocketDisconnect:
            return
        finally:
            self._tails -= 1

    # -- queries ----------------------------------------------------------------------------------
    def query_range(self, source: ArchiveSource, params: MultiDict, request: Request) -> Response:
        started = time.perf_counter()
        query = _parse(params)
        start, end = time_range(params, QUERY_RANGE_DEFAULT_NS)
        if isinstance(query, LogSelector):
            limit, forward = limit_param(params), forward_param(params)
            if duration_param(params, "interval"):
                raise BadParameter('invalid parameter "interval": not supported by the ranklog archive')
            found = evaluate.log_streams(source, query, start, end, limit, forward)
            return _result("streams", found.streams, started, found.entries)
        import numpy as np

        step = step_param(params, start, end)
        steps = np.arange(start, end + 1, step, dtype=np.int64)
        series = evaluate.evaluate_metric(source, query, steps)
        matrix = [{"metric": dict(one.labels),
                   "values": [[_seconds(int(t)), _number(v)] for t, v in zip(one.times, one.values, strict=True)]}
                  for one in series if len(one.times)]
        return _result("matrix", matrix, started, 0)

    def query(self, source: ArchiveSource, params: MultiDict, request: Request) -> Response:
        started = time.perf_counter()
        query = _parse(params)
        if isinstance(query, LogSelector):
            raise BadParameter("log queries are not supported as an instant query type, please change your "
                               "query to a range query type")
        import numpy as np

        now_ns = time.time_ns()
        at = time_param(params, "time", now_ns, now_ns)
        series = evaluate.evaluate_metric(source, query, np.array([at], np.int64))
        vector = [{"metric": dict(one.labels), "value": [_seconds(at), _number(one.values[0])]}
                  for one in series if len(one.times)]
        return _result("vector", vector, started, 0)

    # -- labels and series -------------------------------------------------------------------------
    def labels(self, source: ArchiveSource, params: MultiDict, request: Request) -> Response:
        selector, start, end = _selection(params)
        sets = evaluate.distinct_label_sets(source, selector, start, end)
        present = {name for labels in sets for name, _ in labels}
        return success([name for name in sorted(STREAM_LABELS) if name in present])

    def label_values(self, source: ArchiveSource, params: MultiDict, request: Request) -> Response:
        name = request.path_params["name"]
        selector, start, end = _selection(params)
        if name not in STREAM_LABELS:
            return success([])
        sets = evaluate.distinct_label_sets(source, selector, start, end, (name,))
        values = {value for labels in sets for _, value in labels}
        return success(sorted(values, key=_natural))

    def series(self, source: ArchiveSource, params: MultiDict, request: Request) -> Response:
        selectors = params.getlist("match[]") or params.getlist("match")
        if not selectors:
            raise BadParameter('at least one "match[]" selector is required')
        start, end = time_range(params, LABELS_RANGE_DEFAULT_NS)
        found: set[tuple[tuple[str, str], ...]] = set()
        for text in selectors:
            found |= evaluate.distinct_label_sets(source, parse_selector(text), start, end)
        return success([dict(labels) for labels in sorted(found)])

    def index_stats(self, source: ArchiveSource, params: MultiDict, request: Request) -> Response:
        """Exact counts, not Loki's estimates: streams and entries match; ``chunks`` are the Parquet
        files the query reads and ``bytes`` their stored (compressed) size."""
        selector, start, end = _selection(params, QUERY_RANGE_DEFAULT_NS)
        if selector.never:
            return JSONResponse({"streams": 0, "chunks": 0, "entries": 0, "bytes": 0})
        spec = to_spec(selector, start, end, order=())
        files = engine.select_files(source, spec)
        streams = evaluate.distinct_label_sets(source, selector, start, end)
        entries = engine.count(source, spec)
        return JSONResponse({"streams": len(streams), "chunks": len(files), "entries": entries,
                             "bytes": sum(f.size for f in files)})


def with_warnings(response: Response, source: ArchiveSource) -> Response:
    """The answer, with the files it had to skip as unreadable named in a top-level ``warnings`` list
    (the Prometheus HTTP API's field, which the Loki API mirrors; clients that do not know it ignore it)."""
    if not source.unreadable or not isinstance(response, JSONResponse):
        return response
    import json

    body = json.loads(response.body)
    body["warnings"] = [*body.get("warnings", []), *(f"skipped unreadable file {path} ({why})"
                                                    for path, why in sorted(source.unreadable.items()))]
    return JSONResponse(body, status_code=response.status_code)


def _natural(value: str) -> tuple[int, int | str]:
    """Numbers in numeric order (rank 2 before rank 10), then text."""
    return (0, int(value)) if value.lstrip("-").isdigit() else (1, value)


def _parse(params: Mapping[str, str]) -> Any:
    text = params.get("query")
    if not text:
        raise BadParameter('invalid parameter "query": a LogQL query is required')
    return parse(text)


def _selection(params: MultiDict, default_span_ns: int = LABELS_RANGE_DEFAULT_NS) -> tuple[LogSelector, int, int]:
    text = params.get("query")
    selector = parse_selector(text) if text else LogSelector(())
    start, end = time_range(params, default_span_ns)
    return selector, start, end


def _result(kind: str, result: list, started: float, entries: int) -> JSONResponse:
    stats = {"summary": {"execTime": round(time.perf_counter() - started, 6), "queueTime": 0,
                         "totalEntriesReturned": entries}}
    return success({"resultType": kind, "result": result, "stats": stats})


async def _params(request: Request) -> MultiDict:
    """The query string, plus a urlencoded POST body (Loki accepts both)."""
    items = list(request.query_params.multi_items())
    if request.method == "POST":
        body = await read_body(request)
        if body:
            try:
                items += parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True, max_num_fields=MAX_FIELDS)
            except ValueError:  # more fields than MAX_FIELDS
                raise BodyRefused(413, "too_large", f"more than {MAX_FIELDS} form fields") from None
    return MultiDict(items)
