"""HTTP: ``POST /v1/alerts`` (Alertmanager's webhook and agents' suspects), ``GET /v1/alerts`` (the
incidents and their verdicts), ``GET /v1/reports/<incident id>`` (the HTML report a verdict links to).

- ``POST /v1/alerts`` takes the archive's bearer tokens (Alertmanager: ``http_config.authorization``),
  answers 202 with what became of the alerts (``accepted``, ``ignored``: resolved ones and alerts
  without a ``training_job`` label, ``incidents``), before any triage runs: Alertmanager's webhook
  must not wait for it. A body that is not a notification gets 400 naming what it is and where it
  belongs (a log batch → ``/v1/ingest``, OTLP → ``/v1/logs``, Loki → ``/loki/api/v1/push``); one over
  1 MiB gets 413.
- ``GET /v1/alerts`` (token) lists every incident, newest first.
- ``GET /v1/reports/<id>`` needs no token: the incident id (128 random bits) is the link's credential,
  so the link in a Slack message or a Grafana tooltip opens in a browser. Anything else is 404.

The service lives in ``app.state.verdicts`` (set by :func:`attach`); an app without one answers 503.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from ...alert_notifications import ALERTS_PATH, NotificationError, parse
from ..request_body import BodyRefused, read_body
from ..shippers.dispatch import INGEST, json_shape, wrong_endpoint

_INCIDENT_ID = re.compile(r"[A-Za-z0-9_-]{22}")


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _foreign(body: bytes, problem: str) -> str:
    """Why `body` is refused: what it looks like instead, and where that goes."""
    shape = json_shape(body)
    if shape in ("otlp", "loki"):
        return str(wrong_endpoint(shape, ALERTS_PATH))
    if shape == "events" and (body.lstrip()[:1] == b"[" or body.strip().count(b"\n") > 0):
        return (f"this looks like log records: POST them to {INGEST}, not {ALERTS_PATH} (which takes "
                f"Alertmanager's webhook notifications); nothing was stored")
    return f"{problem}; {ALERTS_PATH} takes Alertmanager's webhook notifications (version 4)"


class AlertRoutes:
    def __init__(self, authorize: Callable[[Request], Response | None]) -> None:
        self.authorize = authorize

    def routes(self) -> list[Route]:
        return [Route(ALERTS_PATH, self.receive, methods=["POST"]),
                Route(ALERTS_PATH, self.incidents, methods=["GET"]),
                Route("/v1/reports/{incident}", self.report, methods=["GET"])]

    @staticmethod
    def _service(request: Request) -> Any:
        return getattr(request.app.state, "verdicts", None)

    def _guard(self, request: Request) -> tuple[Any, Response | None]:
        """(the service, None), or (None, the 401/503 to send)."""
        denied = self.authorize(request)
        if denied is not None:
            return None, denied
        service = self._service(request)
        if service is None:
            return None, _error(503, "this archive runs without a verdict service")
        return service, None

    async def receive(self, request: Request) -> Response:
        service, refused = self._guard(request)
        if refused is not None:
            return refused
        try:  # within max_query_body_size (1 MiB; a notification is a few KiB) and body_timeout
            body = await read_body(request)
        except BodyRefused as exc:
            return JSONResponse({"error": str(exc)}, status_code=exc.status, headers={"Connection": "close"})
        try:
            notification = parse(body)
        except NotificationError as exc:
            return _error(400, _foreign(body, str(exc)))
        answer = await run_in_threadpool(service.notify, notification)
        return JSONResponse(answer, status_code=202)

    async def incidents(self, request: Request) -> Response:
        service, refused = self._guard(request)
        if refused is not None:
            return refused
        listing = service.book.listing()
        for item in listing:
            item["report_url"] = f"{service.report_base}/v1/reports/{item['id']}"
        outages = [dataclasses.asdict(o) for o in service.outages.outages()]
        return JSONResponse({"incidents": listing, "receivers": [r.name for r in service.receivers],
                             "agent_outages": outages})

    async def report(self, request: Request) -> Response:
        service = self._service(request)
        incident = request.path_params["incident"]
        if service is None or not _INCIDENT_ID.fullmatch(incident) or incident not in service.book.incidents:
            return _error(404, "no such report")
        path = service.book.report_path(incident)
        if not os.path.isfile(path):
            return _error(404, "no report yet: the incident has no verdict")
        return FileResponse(path, media_type="text/html; charset=utf-8",
                            headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
                                     "Referrer-Policy": "no-referrer"})


def attach(app: Any, config: Any, pipeline: Any, state_dir: str, metrics: Any) -> Any:
    """Create the verdict service of `app` (started; :meth:`stop` it on shutdown)."""
    from .service import VerdictService

    service = VerdictService(config, pipeline, state_dir, metrics)
    app.state.verdicts = service
    service.start()
    return service


def openapi_paths() -> dict[str, Any]:
    """The OpenAPI entries of these routes (merged into ``/openapi.json``)."""
    error = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    return {
        ALERTS_PATH: {
            "post": {"summary": "Alertmanager webhook (and agents' suspects): triage the alert's training job and "
                                "send the verdict to the configured receivers",
                     "security": [{"bearer": []}],
                     "requestBody": {"required": True, "content": {"application/json": {"schema": {
                         "type": "object", "required": ["alerts"],
                         "properties": {"status": {"type": "string"}, "receiver": {"type": "string"},
                                        "alerts": {"type": "array", "items": {"type": "object"}}}}}}},
                     "responses": {"202": {"description": "taken; triage runs in the background"},
                                   "400": {"description": "not an Alertmanager notification", **error},
                                   "401": {"description": "missing or invalid bearer token", **error},
                                   "413": {"description": "body over 1 MiB", **error}}},
            "get": {"summary": "incidents and their verdicts, newest first; the agent outages triage reads",
                    "security": [{"bearer": []}],
                    "responses": {"200": {"description": "incidents"},
                                  "401": {"description": "missing or invalid bearer token", **error}}},
        },
        "/v1/reports/{incident}": {"get": {
            "summary": "the HTML report a verdict links to (the incident id is the credential)",
            "parameters": [{"name": "incident", "in": "path", "required": True, "schema": {"type": "string"}}],
            "responses": {"200": {"description": "HTML", "content": {"text/html": {"schema": {"type": "string"}}}},
                          "404": {"description": "no such report", **error}}}},
    }
