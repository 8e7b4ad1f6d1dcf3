"""Where a test archive sends its verdicts: one loopback server playing all three receiver kinds.

- ``POST /hook`` (generic webhook) and ``POST /slack`` (Slack-compatible webhook) are recorded as sent;
  ``/slack`` answers ``ok`` as Slack's incoming webhooks do.
- ``/grafana/api/annotations`` replays Grafana's annotations HTTP API as documented (no Grafana
  server can be installed here): ``POST`` takes ``time`` (epoch ms), ``tags``, ``text`` and an optional
  ``dashboardUID``, refuses a body without ``text`` (400, as Grafana does), answers ``{"id": N,
  "message": "Annotation added"}``; ``PATCH /api/annotations/N`` updates ``text``/``tags``/``time``
  and answers ``{"message": "Annotation patched"}``, 404 for an unknown id; both need the bearer token
  given (401 otherwise).
- ``fail_next(path, status)`` makes the next request to a path fail, to test retries.

Every request is kept with the time it arrived (``time.time()``), which the time-to-verdict
benchmark uses as "verdict delivered".
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.helpers.net import free_port, serving


@dataclass
class Received:
    method: str
    path: str
    body: Any
    headers: dict[str, str]
    at: float


@dataclass
class VerdictReceivers:
    port: int
    grafana_token: str = "grafana-sa-token-0123456789"
    requests: list[Received] = field(default_factory=list)
    annotations: dict[int, dict[str, Any]] = field(default_factory=dict)
    failures: dict[str, list[int]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def receivers_config(self, token_file: str) -> list[dict[str, Any]]:
        """The archive's ``verdict.receivers`` pointing here (`token_file` holds :attr:`grafana_token`)."""
        return [{"name": "hook", "type": "webhook", "url": f"{self.base}/hook"},
                {"name": "slack", "type": "slack", "url": f"{self.base}/slack"},
                {"name": "grafana", "type": "grafana", "url": f"{self.base}/grafana", "token_file": token_file,
                 "dashboard_uid": "ranklog-training"}]

    def fail_next(self, path: str, status: int, times: int = 1) -> None:
        with self.lock:
            self.failures.setdefault(path, []).extend([status] * times)

    def sent(self, path: str) -> list[Received]:
        """Requests to `path` that were answered 2xx."""
        with self.lock:
            return [r for r in self.requests if r.path == path and r.method != "FAILED"]

    def documents(self) -> list[dict[str, Any]]:
        return [r.body for r in self.sent("/hook")]


@contextmanager
def running_receivers() -> Iterator[VerdictReceivers]:
    state = VerdictReceivers(free_port())

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self, status: int, body: Any) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json" if not isinstance(body, bytes) else "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
            path = self.path
            with state.lock:
                queued = state.failures.get(path.rstrip("0123456789").rstrip("/")) or state.failures.get(path)
                if queued:
                    status = queued.pop(0)
                    state.requests.append(Received("FAILED", path, body, dict(self.headers), time.time()))
                    self._answer(status, {"message": "injected failure"})
                    return
                state.requests.append(Received(self.command, path, body, dict(self.headers), time.time()))
                if path.startswith("/grafana/"):
                    self._grafana(path.removeprefix("/grafana"), body)
                elif path == "/slack":
                    self._answer(200, b"ok")
                else:
                    self._answer(200, {"status": "received"})

        def _grafana(self, path: str, body: Any) -> None:
            if self.headers.get("Authorization") != f"Bearer {state.grafana_token}":
                self._answer(401, {"message": "Unauthorized"})
                return
            if self.command == "POST" and path == "/api/annotations":
                if not isinstance(body, dict) or not body.get("text"):
                    self._answer(400, {"message": "Failed to save annotation: text is required"})
                    return
                annotation_id = len(state.annotations) + 1
                state.annotations[annotation_id] = {k: body[k] for k in ("time", "timeEnd", "tags", "text",
                                                                            "dashboardUID") if k in body}
                self._answer(200, {"message": "Annotation added", "id": annotation_id})
            elif self.command == "PATCH" and path.startswith("/api/annotations/"):
                annotation_id = int(path.rsplit("/", 1)[1])
                if annotation_id not in state.annotations:
                    self._answer(404, {"message": "Could not find annotation to update"})
                    return
                state.annotations[annotation_id].update({k: body[k] for k in ("time", "timeEnd", "tags", "text")
                                                         if k in body})
                self._answer(200, {"message": "Annotation patched"})
            else:
                self._answer(404, {"message": "Not found"})

        do_POST = do_PATCH = _handle

        def log_message(self, *args: Any) -> None:
            return

    with serving(Handler, state.port, "verdict-receivers"):
        yield state
