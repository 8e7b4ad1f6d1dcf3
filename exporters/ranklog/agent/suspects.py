"""Suspects: a failure line read by the agent is pushed to the archive's ``/v1/alerts`` at once.

The alert path to a verdict waits for a scrape and a rule evaluation (15 s each by default); the
agent has the failing line in hand well before. For every record matching a failure signature
(:mod:`ranklog.signatures`) the metrics thread calls :meth:`SuspectPusher.offer`; at most one
suspect per training job is sent every ``suspect_interval`` (the archive re-triages the job on each,
so more would only cost it work), in the shape of an Alertmanager notification
(:func:`ranklog.alert_notifications.suspect`), to ``suspect_url`` (default the first archive: the
one Alertmanager's verdict receiver calls, so both paths reach one incident).

Best effort by design: one attempt, a short timeout, never a retry loop — the records themselves
travel the exactly-once path, and Prometheus' alert reaches the same archive if a suspect is lost.
Nothing blocks the metrics thread: :meth:`offer` only queues (a bounded queue; a full one counts the
suspect as failed). Every suspect is counted in ``ranklog_agent_suspects_total{result}``; an archive
that does not know ``/v1/alerts`` (404) is logged once and not asked again for ten minutes.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any

from ..alert_notifications import ALERTS_PATH, suspect
from .ship import http_client

log = logging.getLogger("ranklog.agent.suspects")
QUEUE_LIMIT = 64
TIMEOUT = 5.0
UNSUPPORTED_PAUSE = 600.0


class SuspectPusher:
    def __init__(self, cfg: Any, metrics: Any) -> None:
        self.cfg = cfg
        self.url = (cfg.suspect_url or cfg.archive[0]).rstrip("/") + ALERTS_PATH
        self.metrics = metrics
        self._last: dict[Any, float] = {}  # job -> monotonic time of its last suspect
        self._queue: queue.Queue = queue.Queue(maxsize=QUEUE_LIMIT)
        self._paused_until = 0.0
        self._thread = threading.Thread(target=self._run, name="ranklog-suspects", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        if self._thread.is_alive():
            try:
                self._queue.put_nowait(None)
            except queue.Full:
                return
            self._thread.join(timeout)

    def offer(self, signature: str, job: Any, rank: Any, ts_ns: int) -> None:
        """A record matching `signature` was read (called from the metrics thread; never blocks)."""
        now = time.monotonic()
        last = self._last.get(job)
        if last is not None and now - last < self.cfg.suspect_interval:
            self.metrics.agent_suspects.labels(result="skipped").inc()
            return
        self._last[job] = now
        try:
            self._queue.put_nowait(suspect(job, rank, self.cfg.host, signature, ts_ns, self.cfg.host))
        except queue.Full:
            self.metrics.agent_suspects.labels(result="failed").inc()

    def _run(self) -> None:
        with http_client(self.cfg, TIMEOUT, 2) as client:
            while True:
                body = self._queue.get()
                if body is None:
                    return
                self.metrics.agent_suspects.labels(result="sent" if self._send(client, body) else "failed").inc()

    def _send(self, client: Any, body: dict[str, Any]) -> bool:
        import httpx

        if time.monotonic() < self._paused_until:
            return False
        try:
            answer = client.post(self.url, json=body, headers={"Authorization": f"Bearer {self.cfg.token()}"})
        except (httpx.HTTPError, ValueError) as exc:
            log.warning("suspect for job %s not delivered to %s: %s (the alert path still reaches it)",
                        body["alerts"][0]["labels"]["training_job"] or "-", self.url, exc)
            return False
        if answer.status_code in (404, 405):
            log.warning("%s answered %d: that archive takes no suspects (older than ranklog's verdicts?); not "
                        "asking again for %.0f minutes", self.url, answer.status_code, UNSUPPORTED_PAUSE / 60)
            self._paused_until = time.monotonic() + UNSUPPORTED_PAUSE
            return False
        if answer.status_code >= 300:
            log.warning("suspect refused by %s: %d %s", self.url, answer.status_code, answer.text[:200])
            return False
        return True
