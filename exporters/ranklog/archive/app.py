"""The HTTP face of the archive (Starlette): ingest, health, metrics, the OpenAPI description.

Other areas add endpoints by extending :func:`routes` (one line each); handlers reach everything
through ``request.app.state``: ``archive`` (an :class:`ArchiveState`), ``config`` and ``root``.
Use :func:`authorize` for bearer-token checks so every endpoint answers 401 the same way.

Ingest checks run cheapest first, before the body is read: readiness (503), token (401), media
type (415), declared length (413), concurrency (429), flush backlog (503), free disk (507). All
refusals are ``{"error": "<one line>"}`` and are counted in
``ranklog_archive_rejected_requests_total{reason}``; 429/503 carry ``Retry-After``. After decoding,
a token bound to a node identity gets 403 ``{"error", "reason": "host_not_allowed", "hosts": […]}``
for a request holding records of hosts it may not write (on every ingest endpoint; the records are
also counted in ``ranklog_archive_refused_records_total{reason}``).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field

import anyio
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..units import format_duration
from .archive_config import ArchiveConfig
from .auth import TokenStore
from .ingest import IngestError, encoding_code
from .ingest_budget import IngestBudget, OverBudget
from .loki.routes import LokiAPI, LokiLimits
from .openapi import openapi_document
from .pipeline import HostNotAllowed, Pipeline
from .query_api import QueryEndpoint, QueryLimits
from .shippers.dispatch import INGEST, LOKI_PUSH, OTLP_LOGS
from .shippers.endpoints import answer, request_code, stored_body
from .storage import DiskProbe, Storage
from .tail_api import TailEndpoint
from .verdicts.routes import AlertRoutes
from .wal import WalFailure

log = logging.getLogger("ranklog.archive.app")


@dataclass
class ArchiveState:
    config: ArchiveConfig
    storage: Storage
    pipeline: Pipeline
    tokens: TokenStore
    metrics: object
    disk: DiskProbe
    budget: IngestBudget
    ready: bool = False
    inflight: int = 0
    inflight_by_token: dict[str, int] = field(default_factory=dict)  # keyed by a hash, never the token


def error(status: int, message: str, retry_after: float | None = None, details: dict | None = None,
          **headers: str) -> JSONResponse:
    if retry_after is not None:
        headers["Retry-After"] = str(max(1, round(retry_after)))
    return JSONResponse({"error": message, **(details or {})}, status_code=status, headers=headers or None)


def _reject(state: ArchiveState, reason: str, status: int, message: str, **kwargs) -> JSONResponse:
    state.metrics.archive_rejected_requests.labels(reason=reason).inc()
    return error(status, message, **kwargs)


def _refuse_hosts(state: ArchiveState, exc: HostNotAllowed) -> JSONResponse:
    state.metrics.archive_refused_records.labels(reason=exc.reason).inc(exc.records)
    return _reject(state, exc.reason, exc.status, str(exc), details={"reason": exc.reason, "hosts": exc.hosts})


def token_key(authorization: str | None) -> str:
    """Who is asking, for per-client limits: a short hash of the credential (never the token itself)."""
    return hashlib.sha256((authorization or "").encode()).hexdigest()[:16]


def authorize(request: Request) -> JSONResponse | None:
    """None when the request carries a valid bearer token, else the 401 to send."""
    state: ArchiveState = request.app.state.archive
    if state.tokens.check(request.headers.get("authorization")):
        return None
    return _unauthorized(state)


def _unauthorized(state: ArchiveState) -> JSONResponse:
    return _reject(state, "unauthorized", 401, "missing or invalid bearer token (or basic auth with the token as "
                   "password)", **{"WWW-Authenticate": 'Bearer realm="ranklog", Basic realm="ranklog"'})


async def ingest(request: Request) -> Response:
    return await _ingest(request, INGEST)


async def otlp_logs(request: Request) -> Response:
    return await _ingest(request, OTLP_LOGS)


async def loki_push(request: Request) -> Response:
    return await _ingest(request, LOKI_PUSH)


async def _ingest(request: Request, endpoint: str) -> Response:
    state: ArchiveState = request.app.state.archive
    config = state.config
    if not state.ready or state.pipeline.failure:
        reason = state.pipeline.failure or "starting: replaying the write-ahead log"
        return _reject(state, "unavailable", 503, f"archive not ready ({reason})", retry_after=5)
    caller = state.tokens.identify(request.headers.get("authorization"))
    if caller is None:
        return _unauthorized(state)
    try:
        content_type = request_code(endpoint, request.headers)
        encoding = encoding_code(request.headers.get("content-encoding"))
    except IngestError as exc:
        return _reject(state, exc.reason, exc.status, str(exc))
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > config.max_body_size:
        return _reject(state, "too_large", 413, f"body of {declared} bytes exceeds max_body_size "
                       f"({config.max_body_size})")
    if state.inflight >= config.max_inflight_requests:
        return _reject(state, "overloaded", 429, "too many concurrent ingest requests", retry_after=1)
    client = token_key(request.headers.get("authorization"))
    if state.inflight_by_token.get(client, 0) >= config.max_inflight_per_token:
        return _reject(state, "overloaded_token", 429, "too many concurrent ingest requests with this token",
                       retry_after=1)
    if state.pipeline.pending_bytes() > config.max_pending_bytes:
        return _reject(state, "flush_backlog", 503, "Parquet writing is behind; retry shortly", retry_after=2)
    free = state.disk.free_bytes()
    if free is not None and free < config.disk_reserve:
        return _reject(state, "disk_full", 507, f"free disk {free} bytes is below the reserve {config.disk_reserve}")
    state.inflight += 1
    state.inflight_by_token[client] = state.inflight_by_token.get(client, 0) + 1
    charge = state.budget.open(client)
    try:
        chunks: list[bytes] = []
        size = 0
        with anyio.move_on_after(config.body_timeout) as deadline:
            async for chunk in request.stream():
                size += len(chunk)
                if size > config.max_body_size:
                    return _reject(state, "too_large", 413, f"body exceeds max_body_size ({config.max_body_size})",
                                   Connection="close")
                # twice: the chunks and their joined copy (stored_body may copy once more, briefly)
                charge.add(2 * len(chunk), "request body")
                chunks.append(chunk)
        if deadline.cancelled_caught:  # a slow (or stalled) upload: its slot goes back now
            return _reject(state, "body_timeout", 408, f"request body not received within {config.body_timeout:g}s",
                           Connection="close")
        body = stored_body(content_type, request.headers, b"".join(chunks))
        chunks.clear()
        result = await anyio.to_thread.run_sync(state.pipeline.ingest, body, content_type, encoding, caller, charge)
    except HostNotAllowed as exc:
        return _refuse_hosts(state, exc)
    except OverBudget as exc:  # 413: the request alone is too big; 429: others hold the budget now
        return _reject(state, exc.reason, exc.status, str(exc), retry_after=1 if exc.status == 429 else None,
                       Connection="close")
    except IngestError as exc:
        return _reject(state, exc.reason, exc.status, str(exc))
    except WalFailure as exc:
        return _reject(state, "wal_failure", 503, str(exc), retry_after=2 if exc.retryable else 30)
    finally:
        charge.close()
        state.inflight -= 1
        state.inflight_by_token[client] -= 1
        if not state.inflight_by_token[client]:
            del state.inflight_by_token[client]
    state.metrics.archive_ingested_records.inc(result.accepted)
    state.metrics.archive_duplicate_records.inc(result.duplicates)
    state.metrics.archive_repaired_records.inc(result.repaired)
    state.metrics.archive_ingested_bytes.inc(len(body))
    return answer(endpoint, content_type, result.accepted, result.duplicates, result.repaired)


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    state: ArchiveState = request.app.state.archive
    if state.pipeline.failure:
        return JSONResponse({"status": "failed", "error": state.pipeline.failure}, status_code=503)
    if not state.ready:
        return JSONResponse({"status": "starting"}, status_code=503)
    return JSONResponse({"status": "ready", "archive_id": state.config.archive_id})


async def metrics(request: Request) -> Response:
    state: ArchiveState = request.app.state.archive
    state.tokens.refresh()
    state.metrics.archive_wal_bytes.set(state.pipeline.unflushed_wal_bytes())
    free = state.disk.free_bytes()
    if free is not None:
        state.metrics.archive_disk_free_bytes.set(free)
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)


async def openapi(request: Request) -> Response:
    return JSONResponse(openapi_document())


def routes(config: ArchiveConfig | None = None) -> list[Route]:
    """Every endpoint of the archive. Add a route here to extend the service."""
    config = config or ArchiveConfig()
    limits = config.query.budget_limits()
    loki = LokiLimits(max_concurrent=config.query.max_concurrent, budget=limits,
                      retention=format_duration(config.retention.longest()))
    return [
        Route(INGEST, ingest, methods=["POST"]),
        Route(OTLP_LOGS, otlp_logs, methods=["POST"]),
        Route(LOKI_PUSH, loki_push, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        # (a bound method: Starlette treats a callable object as a raw ASGI app, a method as a handler)
        Route("/v1/query", QueryEndpoint(_archive_root, authorize,
                                         QueryLimits(budget=config.query.budget_limits(export=True))).handle,
              methods=["GET", "POST"]),
        Route("/v1/tail", TailEndpoint(_archive_root, authorize).handle, methods=["POST"]),
        *LokiAPI(_archive_root, authorize, loki).routes(),
        *AlertRoutes(authorize).routes(),
    ]


def _archive_root(request: Request) -> str:
    return request.app.state.root


def create_app(state: ArchiveState) -> Starlette:
    app = Starlette(routes=routes(state.config))
    app.state.archive = state
    app.state.config = state.config
    app.state.root = state.config.root
    app.state.s3 = state.config.s3.settings()
    return app
