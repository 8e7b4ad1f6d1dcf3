"""Bodies of the archive's read endpoints (``/v1/query``, the Loki API's POST forms): bounded in size and
in time, like ingest's.

A query's body is a filter, a few kilobytes: past ``max_query_body_size`` (default 1 MiB) the answer is
413 with the connection closed, before more of it is read or held (64 MB of ``a&`` once held 2.8 GB);
a body that does not arrive within ``body_timeout`` gets 408 with the connection closed. Both are
counted in ``ranklog_archive_rejected_requests_total`` (``too_large``, ``body_timeout``). Ingest has its
own path (app.py), with the memory budget.
"""

from __future__ import annotations

import anyio
from starlette.requests import Request

DEFAULT_LIMIT, DEFAULT_TIMEOUT = 1024**2, 30.0  # (a route served without an archive config: tools, tests)


class BodyRefused(Exception):
    """The body was not read: `status` (413 or 408) and the metric `reason` say why."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status, self.reason = status, reason


async def read_body(request: Request) -> bytes:
    """The whole body, within the archive's ``max_query_body_size`` and ``body_timeout``."""
    config = getattr(request.app.state, "config", None)
    limit = getattr(config, "max_query_body_size", DEFAULT_LIMIT)
    timeout = getattr(config, "body_timeout", DEFAULT_TIMEOUT)
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _refused(request, 413, "too_large", f"body of {declared} bytes exceeds max_query_body_size ({limit})")
    chunks: list[bytes] = []
    size = 0
    with anyio.move_on_after(timeout) as deadline:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _refused(request, 413, "too_large", f"body exceeds max_query_body_size ({limit})")
            chunks.append(chunk)
    if deadline.cancelled_caught:
        raise _refused(request, 408, "body_timeout", f"request body not received within {timeout:g}s")
    return b"".join(chunks)


def _refused(request: Request, status: int, reason: str, message: str) -> BodyRefused:
    archive = getattr(request.app.state, "archive", None)
    if archive is not None:
        archive.metrics.archive_rejected_requests.labels(reason=reason).inc()
    return BodyRefused(status, reason, message)
