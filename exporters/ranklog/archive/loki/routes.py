"""The Loki-compatible read API of the archive, for Grafana's Loki datasource, Explore and Logs Drilldown.

``GET|POST /loki/api/v1/…`` with Loki's parameters and response shapes (Loki's HTTP API reference;
checked by ``tests/archive/loki_schema.json``): ``query_range``, ``query`` (metric queries,
``vector(1)+vector(1)`` included: Grafana's health check), ``labels``/``label``,
``label/<name>/values``, ``series``, ``index/stats``, ``index/volume``, ``index/volume_range``,
``patterns``, ``detected_labels``, ``detected_fields``, ``detected_field/<name>/values``,
``drilldown-limits``, ``status/buildinfo`` (Loki :data:`LOKI_VERSION`, whose features these
are) and the ``tail`` WebSocket. Same tokens as ingest, as a bearer header or as basic auth
(:mod:`ranklog.archive.auth`). POST bodies are ``application/x-www-form-urlencoded``.

Answers: ``X-Loki-Response-Encoding-Flags: categorize-labels`` (Grafana 11/12) puts structured
metadata and parsed labels beside each line (:mod:`.evaluate`). Errors are Loki's: the message as
``text/plain`` with 400 (``parse error at line 1, col 7: …``, limits), 504 past the query timeout,
429 with ``Retry-After`` past :attr:`LokiLimits.max_concurrent` queries.

Every query runs under a :class:`~ranklog.query.budget.QueryBudget` (time, memory, Loki's
``max_query_series``), and is cancelled when its client goes away: a watcher polls the connection
while the query's thread works, so an abandoned query gives its slot back within a batch of work.
Large answers are written in pieces, so serializing them never holds the interpreter for long (other
clients' ingest keeps answering).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import anyio
from starlette.datastructures import MultiDict
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from ... import __version__
from ...errors import UserError
from ...query import engine
from ...query.budget import BudgetLimits, QueryAborted, QueryBudget
from ...query.logql.labels import SELECTOR_LABELS, STREAM_LABELS
from ...query.logql.lexer import LogQLError
from ...query.logql.parser import parse, parse_selector
from ...query.logql.syntax import LogSelector, VectorAggregation
from ...query.logql.values import format_sample, format_seconds
from ...query.sources import ArchiveSource
from ..query_work import in_thread, watched
from ..request_body import BodyRefused, read_body
from . import drilldown, evaluate, metric
from .params import (
    LABELS_RANGE_DEFAULT_NS,
    MAX_ENTRIES,
    QUERY_RANGE_DEFAULT_NS,
    BadParameter,
    count_param,
    duration_param,
    forward_param,
    limit_param,
    step_param,
    time_param,
    time_range,
)

MAX_FIELDS = 10_000  # form fields of a POST body (each match[] of /series is one)
PREFIX = "/loki/api/v1"
LOKI_VERSION = "3.6.0"
CATEGORIZE = "categorize-labels"
ENCODING_FLAGS_HEADER = "x-loki-response-encoding-flags"
TAIL_INTERVAL_S = 1.0
MAX_QUERY_CHARS = 64 * 1024
MAX_SERIES_SELECTORS = 64
STREAM_CHUNK_ITEMS = 64


@dataclass(frozen=True)
class LokiLimits:
    """What the API allows a client; ``drilldown-limits`` reports them under Loki's names."""

    max_concurrent: int = 4
    max_tails: int = 8
    budget: BudgetLimits = field(default_factory=BudgetLimits)
    retention: str = "30d"


def success(data: Any, status: int = 200) -> JSONResponse:
    return JSONResponse({"status": "success", "data": data}, status_code=status)


def loki_error(status: int, message: str, **headers: str) -> PlainTextResponse:
    """Loki's error answer: the message alone, as text/plain."""
    return PlainTextResponse(message, status_code=status, headers=headers or None)


def streamed_json(head: dict[str, Any], items: list[Any], path: tuple[str, ...] = ("data", "result")) -> Response:
    """`head` with `items` at `path`, written a few items at a time (no long-held interpreter)."""
    marker = "\x00ranklog-items\x00"
    target = head
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = marker
    prefix, suffix = json.dumps(head).split(json.dumps(marker))

    def body() -> Iterator[bytes]:
        yield (prefix + "[").encode()
        for start in range(0, len(items), STREAM_CHUNK_ITEMS):
            chunk = ",".join(json.dumps(item, separators=(",", ":")) for item in items[start:start + STREAM_CHUNK_ITEMS])
            yield (("," if start else "") + chunk).encode()
        yield ("]" + suffix).encode()

    return StreamingResponse(body(), media_type="application/json")


class LokiAPI:
    """The routes of the Loki read API over the archive at ``root(request)``."""

    def __init__(self, root: Callable[[Request], str], authorize: Callable[[Request], Response | None],
                 limits: LokiLimits | None = None) -> None:
        self.root = root
        self.authorize = authorize
        self.limits = limits or LokiLimits()
        self._slots = threading.BoundedSemaphore(self.limits.max_concurrent)
        self._tails = 0

    def routes(self) -> list[Route]:
        both = ["GET", "POST"]
        endpoints: list[tuple[str, Callable[..., Response]]] = [
            ("query_range", self.query_range), ("query", self.query), ("labels", self.labels), ("label", self.labels),
            ("label/{name}/values", self.label_values), ("series", self.series), ("index/stats", self.index_stats),
            ("index/volume", self.volume), ("index/volume_range", self.volume_range), ("patterns", self.patterns),
            ("detected_labels", self.detected_labels), ("detected_fields", self.detected_fields),
            ("detected_field/{name}/values", self.detected_field_values),
        ]
        return [
            *(Route(f"{PREFIX}/{path}", self._endpoint(work), methods=both) for path, work in endpoints),
            Route(f"{PREFIX}/status/buildinfo", self._plain(self.buildinfo), methods=["GET"]),
            Route(f"{PREFIX}/drilldown-limits", self._plain(self.drilldown_limits), methods=["GET"]),
            WebSocketRoute(f"{PREFIX}/tail", self.tail),
        ]

    # -- the frame every query runs in ------------------------------------------------------------------
    def _source(self, request: Request) -> ArchiveSource:
        return ArchiveSource.open(self.root(request), getattr(request.app.state, "s3", None))

    def _plain(self, work: Callable[[Request], Response]) -> Callable:
        async def handle(request: Request) -> Response:
            denied = self.authorize(request)
            return denied if denied is not None else work(request)

        return handle

    def _endpoint(self, work: Callable[[ArchiveSource, MultiDict, Request], Response]) -> Callable:
        async def handle(request: Request) -> Response:
            denied = self.authorize(request)
            if denied is not None:
                return denied
            try:
                params = await _params(request)
            except BodyRefused as exc:
                return loki_error(exc.status, str(exc), Connection="close")
            except BadParameter as exc:
                return loki_error(413 if "too large" in str(exc) else 400, str(exc))
            if not self._slots.acquire(blocking=False):
                return loki_error(429, f"too many outstanding requests (limit {self.limits.max_concurrent})",
                                  **{"Retry-After": "1"})
            running = QueryBudget(self.limits.budget)

            def run() -> Response:
                try:
                    source = self._source(request)
                    return with_warnings(work(source, params, request), source)
                finally:
                    self._slots.release()

            try:
                async with watched(request, running):
                    return await in_thread(running, run)
            except (LogQLError, BadParameter) as exc:
                return loki_error(400, str(exc))
            except QueryAborted as exc:
                return loki_error(exc.status, str(exc))
            except UserError as exc:
                return loki_error(400, str(exc))

        return handle

    async def tail(self, websocket: WebSocket) -> None:
        if self.authorize(websocket) is not None:  # type: ignore[arg-type]  # headers and app are all it reads
            await websocket.close(code=1008)
            return
        params = websocket.query_params
        try:
            selector = parse_selector(_query_text(params))
            limit = limit_param(params)
            delay = min(duration_param(params, "delay_for") or 0, 5 * 10**9)
            now_ns = time.time_ns()
            last = time_param(params, "start", now_ns - QUERY_RANGE_DEFAULT_NS, now_ns)
        except (LogQLError, UserError) as exc:
            await websocket.close(code=1008, reason=str(exc)[:120])
            return
        if self._tails >= self.limits.max_tails:
            await websocket.close(code=1013, reason=f"too many tails (limit {self.limits.max_tails})")
            return
        categorize = CATEGORIZE in websocket.headers.get(ENCODING_FLAGS_HEADER, "")
        self._tails += 1
        await websocket.accept()
        try:
            source = await anyio.to_thread.run_sync(self._source, websocket)  # type: ignore[arg-type]
            while True:
                until = time.time_ns() - delay
                if until > last:
                    def poll(start: int = last, end: int = until) -> evaluate.Streams:
                        return evaluate.log_streams(source, selector, start, end, limit, True, categorize)

                    found = await in_thread(QueryBudget(self.limits.budget), poll)
                    if found.entries:
                        message: dict[str, Any] = {"streams": found.streams, "dropped_entries": None}
                        if categorize:
                            message["encodingFlags"] = [CATEGORIZE]
                        await websocket.send_json(message)
                        last = max(int(ts) for stream in found.streams for ts, *_ in stream["values"]) + 1
                with contextlib.suppress(asyncio.TimeoutError):
                    received = await asyncio.wait_for(websocket.receive(), TAIL_INTERVAL_S)
                    if received["type"] == "websocket.disconnect":
                        return
        except (WebSocketDisconnect, QueryAborted):
            return
        finally:
            self._tails -= 1

    # -- queries ----------------------------------------------------------------------------------------
    def query_range(self, source: ArchiveSource, params: MultiDict, request: Request) -> Response:
        started = time.perf_counter()
        query = parse(_query_text(params))
        start, end = time_range(params, QUERY_RANGE_DEFAULT_NS)
        if isinstance(query, LogSelector):
            limit, forward = limit_param(params), forward_param(params)
            if duration_param(params, "interval"):
                raise BadParameter('invalid parameter "interval": not supported by the ranklog archive')
            categorize = _categorize(request)
            found = evaluate.log_streams(source, query, start, end, limit, forward, categorize)
            return _result("streams", found.streams, started, found.entries, categorize)
        import numpy as np

        step = step_param(params, start, end)
        steps = np.arange(start, end + 1, step, dtype=np.int64)
        value = metric.evaluate(source, query, steps)
        return _result("matrix", _matrix(value, steps), started, 0)

    def query(self, source: ArchiveSource, params: MultiDict, request: Request) -> Response:
        started = time.perf_counter()
        query = parse(_query_text(params))
        if isinstance(query, LogSelector):
            raise BadParameter("log queries are not supported as an instant query type, please change your "
                               "query to a range query type")
        import numpy as np

        now_ns = time.time_ns()
        at = time_param(params, "time", now_ns, now_ns)
        value = metric.evaluate(source, query, np.array([at], np.int64))
        if isinstance(value, metric.Scalar):
            return _result("scalar", [format_seconds(at), format_sample(value.values[0])], started, 0)
        vector = [{"metric": dict(labels), "value": [format_seconds(at), format_sample(row[0])]}
                  for labels, row in zip(value.labels, value.values, strict=True) if not np.isnan(row[0])]
        if isinstance(query, VectorAggregation) and query.op in ("sort", "sort_desc"):
            vector.sort(key=lambda item: float(item["value"][1]), reverse=query.op == "sort_desc")
        return _result("vector", vector, started, 0)

    # -- labels and series --------------------------------------------------------------------------------
    def labels(self, source: ArchiveSource, params: MultiDict, request: Request) -> Response:
        selector, start, end = _selection(params)
        sets = evaluate.distinct_label_sets(source, selector, start, end)
        present = {name for labels in sets for name, _ in labels}
        return success([name for name in sorted(STREAM_LABELS) if name in present])

    def label_values(self, source: ArchiveSource, params: MultiDict, request: Request) -> Response:
        name = request.path_params["name"]
        selector, start, end = _selection(params)
        if name not in SELECTOR_LABELS:
            return success([])
        if name in STREAM_LABELS:
            sets = evaluate.distinct_label_sets(source, selector, start, end, (name,))
            values = {value for labels in sets for _, value in labels}
        else:  # an extension: the selector-matchable metadata (local_rank, role, trace_id, detected_level)
            values = {entry.meta[name] for entry in evaluate.select_entries(source, selector, start, end, MAX_ENTRIES,
                                                                             False) if name in entry.meta}
        return success(sorted(values, key=_natural))

    def series(self, source: ArchiveSource, params: MultiDict, request: Request) -> Response:
        selectors = params.getlist("match[]") or params.getlist("match")
        if not selectors:
            raise BadParameter('at least one "match[]" selector is required')
        if len(selectors) > MAX_SERIES_SELECTORS:
            raise BadParameter(f"too many match[] selectors ({len(selectors)} > {MAX_SERIES_SELECTORS})")
        start, end = time_range(params, LABELS_RANGE_DEFAULT_NS)
        found: set[tuple[tuple[str, str], ...]] = set()
        for text in selectors:
            found |= evaluate.distinct_label_sets(source, parse_selector(_checked(text)), start, end)
        return success([dict(labels) for labels in sorted(found)])

    def index_stats(self, source: ArchiveSource, params: MultiDict, request: Request) -> Response:
        """Exact counts, not Loki's estimates: streams and entries match; ``chunks`` are the Parquet
        files the query reads and ``bytes`` their stored (compressed) size."""
        selector, start, end = _selection(params, QUERY_RANGE_DEFAULT_NS)
        if selector.never:
            return JSONResponse({"streams": 0, "chunks": 0, "entries": 0, "bytes": 0})
        spec = evaluate.to_spec(selector, start, end)
        files = engine.select_files(source, spec)
        streams = evaluate.distinct_label_sets(source, selector, start, end)
        entries = evaluate.count_entries(source, selector, start, end)
        return JSONResponse({"streams": len(streams), "chunks": len(files), "entries": entries,
                             "bytes": sum(f.size for f in files)})

    # -- Logs Drilldown -----------------------------------------------------------------------------------------
    def volume(self, source: ArchiveSource, params: MultiDict, request: Request) -> Response:
        selector, start, end = _volume_selection(params)
        table = drilldown.volume_table(source, selector, start, end)
        target = drilldown.target_labels(selector, params.get("targetLabels"))
        series = drilldown.volume_series(table, target, params.get("aggregateBy") == "labels")
        limit = count_param(params, ("limit",), 100, 1 << 20)
        vector = [{"metric": dict(labels), "value": [format_seconds(end), str(sum(series[labels].values()))]}
                  for labels in drilldown.largest(series, limit)]
        return _result("vector", vector, time.perf_counter(), 0)

    def volume_range(self, source: ArchiveSource, params: MultiDict, request: Request) -> Response:
        import numpy as np

        selector, start, end = _volume_selection(params)
        step = step_param(params, start, end)
        table = drilldown.volume_table(source, selector, start, end, step)
        target = drilldown.target_labels(selector, params.get("targetLabels"))
        series = drilldown.volume_series(table, target, params.get("aggregateBy") == "labels")
        limit = count_param(params, ("limit",), 100, 1 << 20)
        matrix = []
        for labels in drilldown.largest(series, limit):
            buckets = np.asarray(sorted(series[labels].items()), np.int64).reshape(-1, 2)
            # Loki cuts [start, end] at the multiples of the step since the epoch and reports each piece at
            # its end, 1 ms early but the last (pkg/querier/queryrange/volume.go, pkg/util ForInterval)
            ends = (np.maximum(buckets[:, 0], start) // step + 1) * step
            at = np.where(ends >= end, end, ends - 10**6)
            times, where = np.unique(at, return_inverse=True)
            totals = np.bincount(where, weights=buckets[:, 1])
            matrix.append({"metric": dict(labels), "values": [[format_seconds(int(t)), str(int(v))]
                                                              for t, v in zip(times, totals, strict=True) if v]})
        return _result("matrix", matrix, time.perf_counter(), 0)

    def patterns(self, source: ArchiveSource, params: MultiDict, request: Request) -> Response:
        selector, start, end = _selection(params, QUERY_RANGE_DEFAULT_NS)
        step = step_param(params, start, end)
        return success(drilldown.patterns(source, selector, start, end, step))

    def detected_labels(self, source: ArchiveSource, params: MultiDict, request: Request) -> Response:
        selector, start, end = _selection(params, QUERY_RANGE_DEFAULT_NS)
        return JSONResponse({"detectedLabels": drilldown.detected_labels(source, selector, start, end)})

    def detected_fields(self, source: ArchiveSource, params: MultiDict, request: Request) -> Response:
        selector, start, end = _selection(params, QUERY_RANGE_DEFAULT_NS)
        limit = count_param(params, ("limit", "field_limit"), drilldown.DEFAULT_FIELD_LIMIT, 1 << 20)
        found = self._fields(source, selector, start, end, params)
        return JSONResponse({"fields": drilldown.detected_fields(found, limit), "limit": limit})

    def detected_field_values(self, source: ArchiveSource, params: MultiDict, request: Request) -> Response:
        selector, start, end = _selection(params, QUERY_RANGE_DEFAULT_NS)
        limit = count_param(params, ("limit", "field_limit"), drilldown.DEFAULT_FIELD_LIMIT, 1 << 20)
        found = self._fields(source, selector, start, end, params)
        values = found.get(request.path_params["name"], (set(), None, None))[0]
        return JSONResponse({"values": sorted(values, key=_natural)[:limit], "limit": limit})

    def _fields(self, source: ArchiveSource, selector: LogSelector, start: int, end: int,
                params: Mapping[str, str]) -> dict[str, Any]:
        line_limit = count_param(params, ("line_limit",), drilldown.DEFAULT_LINE_LIMIT, MAX_ENTRIES)
        return drilldown.field_values(source, selector, start, end, line_limit)

    def drilldown_limits(self, request: Request) -> Response:
        """Loki's ``/drilldown-limits`` (pkg/loki/config_handler.go): this archive's limits under Loki's names."""
        limits = self.limits.budget
        return JSONResponse({
            "limits": {
                "discover_log_levels": True, "discover_service_name": ["job"], "log_level_fields": ["level"],
                "max_entries_limit_per_query": MAX_ENTRIES, "max_line_size_truncate": False,
                "max_query_bytes_read": f"{limits.memory_bytes >> 20}MiB", "max_query_length": "0s",
                "max_query_lookback": "0s", "max_query_range": "0s", "max_query_series": limits.max_series,
                "metric_aggregation_enabled": False, "pattern_persistence_enabled": False,
                "query_timeout": f"{limits.timeout_s:g}s", "retention_period": self.limits.retention,
                "volume_enabled": True, "volume_max_series": 1 << 20,
            },
            "pattern_ingester_enabled": True,
            "version": LOKI_VERSION,
        })

    def buildinfo(self, request: Request) -> Response:
        """Loki's ``/status/buildinfo``: the Loki version whose API this is (see the module docstring)."""
        return JSONResponse({"version": LOKI_VERSION, "revision": f"ranklog-{__version__}", "branch": "ranklog",
                             "buildUser": "ranklog", "buildDate": "", "goVersion": ""})


# -- helpers ----------------------------------------------------------------------------------------------------
def _categorize(request: Request) -> bool:
    return CATEGORIZE in [flag.strip() for flag in request.headers.get(ENCODING_FLAGS_HEADER, "").split(",")]


def with_warnings(response: Response, source: ArchiveSource) -> Response:
    """The answer, with the files it had to skip as unreadable named in a top-level ``warnings`` list
    (the Prometheus HTTP API's field, which the Loki API mirrors; clients that do not know it ignore it)."""
    if not source.unreadable:
        return response
    warnings = [f"skipped unreadable file {path} ({why})" for path, why in sorted(source.unreadable.items())]
    if isinstance(response, JSONResponse):
        body = json.loads(response.body)
        body["warnings"] = [*body.get("warnings", []), *warnings]
        return JSONResponse(body, status_code=response.status_code)
    if isinstance(response, StreamingResponse) and response.media_type == "application/json":
        response.body_iterator = _closed_with(response.body_iterator, f',"warnings":{json.dumps(warnings)}}}')
    return response


async def _closed_with(pieces: Any, tail: str) -> Any:
    """A streamed JSON object whose closing brace is replaced by `tail` (a field added, then the brace)."""
    last: bytes | None = None
    async for piece in pieces:
        if last is not None:
            yield last
        last = piece.encode() if isinstance(piece, str) else piece
    text = (last or b"").decode()
    yield (text[:text.rfind("}")] + tail).encode()


def _natural(value: str) -> tuple[int, int | str]:
    """Numbers in numeric order (rank 2 before rank 10), then text."""
    return (0, int(value)) if value.lstrip("-").isdigit() else (1, value)


def _checked(text: str) -> str:
    if len(text) > MAX_QUERY_CHARS:
        raise BadParameter(f"the query is longer than {MAX_QUERY_CHARS} characters")
    return text


def _query_text(params: Mapping[str, str]) -> str:
    text = params.get("query")
    if not text:
        raise BadParameter('invalid parameter "query": a LogQL query is required')
    return _checked(text)


def _selection(params: MultiDict, default_span_ns: int = LABELS_RANGE_DEFAULT_NS) -> tuple[LogSelector, int, int]:
    text = (params.get("query") or "").strip()
    selector = parse_selector(_checked(text)) if text else LogSelector(())
    start, end = time_range(params, default_span_ns)
    return selector, start, end


def _volume_selection(params: MultiDict) -> tuple[LogSelector, int, int]:
    text = (params.get("query") or "").strip()
    selector = parse_selector(_checked(text), pipeline=False) if text else LogSelector(())
    start, end = time_range(params, QUERY_RANGE_DEFAULT_NS)
    return selector, start, end


def _matrix(value: metric.Value, steps: Any) -> list[dict[str, Any]]:
    import numpy as np

    if isinstance(value, metric.Scalar):
        value = metric.Matrix([()], value.values[None, :])
    out = []
    for labels, row in zip(value.labels, value.values, strict=True):
        present = np.flatnonzero(~np.isnan(row))
        if len(present):
            out.append({"metric": dict(labels),
                        "values": [[format_seconds(int(steps[i])), format_sample(row[i])] for i in present]})
    return out


def _result(kind: str, result: Any, started: float, entries: int, categorize: bool = False) -> Response:
    stats = {"summary": {"execTime": round(time.perf_counter() - started, 6), "queueTime": 0,
                         "totalEntriesReturned": entries}}
    data: dict[str, Any] = {"resultType": kind, "result": None, "stats": stats}
    if categorize:
        data["encodingFlags"] = [CATEGORIZE]
    if not isinstance(result, list) or kind == "scalar":
        data["result"] = result
        return JSONResponse({"status": "success", "data": data})
    return streamed_json({"status": "success", "data": data}, result)


async def _params(request: Request) -> MultiDict:
    """The query string, plus a urlencoded POST body (Loki accepts both), within max_query_body_size."""
    items = list(request.query_params.multi_items())
    if request.method == "POST":
        body = await read_body(request)
        if body:
            try:
                items += parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True, max_num_fields=MAX_FIELDS)
            except ValueError:  # more fields than MAX_FIELDS
                raise BodyRefused(413, "too_large", f"more than {MAX_FIELDS} form fields") from None
    return MultiDict(items)
