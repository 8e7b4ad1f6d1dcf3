"""The verdict service: alerts and suspects in, one verdict per incident out, kept up to date.

Flow for a trigger (a firing alert of a training job from Alertmanager, or an agent's suspect):

1. the job's incident is joined or opened (:mod:`.incidents`) and a triage of the job is scheduled —
   at once for an alert; ``settle`` later for a suspect, whose records may still be on their way;
   never more often than ``retriage_interval`` per job, however many alerts arrive (a 1000-rank
   timeout storm costs one triage, not a thousand);
2. one worker thread runs it: it asks the pipeline to flush what is acknowledged so far and waits
   until it is readable (:meth:`Pipeline.wait_visible`), then triages the job over its recent window
   (:mod:`.judge`) and writes the report;
3. a verdict whose status is worth a message (:data:`.document.SEND_STATUSES`) and differs from the
   incident's last one (:func:`.document.fingerprint`) becomes a new revision; every receiver behind
   it is sent the document — ``kind: verdict`` the first time, ``update`` after. A suspect whose
   triage shows no failure yet is tried again every 2 s for ``suspect_wait`` and then dropped: a
   suspect never pages by itself, only the verdict does.

An agent-down alert (``RanklogAgentDown``, routed here as context) is kept in the outage book
(:mod:`.outages`) that every triage reads as evidence of a lost node. When it starts, every open
incident is triaged again, and the alert acts like a suspect of the jobs that name no job: the
triage of job ``""`` finds the job whose node went down and pages only if its verdict is a failure.

Failed deliveries are counted (``ranklog_archive_verdict_delivery_failures_total``), logged and tried
again every 30 s while the incident is open. A resolved notification from Alertmanager (every alert
of the job resolved) closes the incident; so does ``incident_ttl`` without a trigger.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from ...agent_outages import AGENT_DOWN_ALERT
from ...alert_notifications import FIRING, RESOLVED, AlertEvent, Notification
from .config import default_report_url
from .document import SEND_STATUSES, document, fingerprint, verdict_fields
from .incidents import Incident, IncidentBook
from .judge import judge, report
from .outages import OutageBook
from .receivers import DeliveryError, build

log = logging.getLogger("ranklog.archive.verdicts")
SUSPECT_RETRY = 2.0  # seconds between triages of a suspect that shows no failure yet
MAINTENANCE = 30.0  # seconds between expiry checks and delivery retries
VISIBLE_TIMEOUT = 30.0


@dataclass
class _JobState:
    due: float | None = None  # monotonic time of the next triage
    last_run: float = -math.inf


class VerdictService:
    def __init__(self, config: Any, pipeline: Any, state_dir: str, metrics: Any) -> None:
        self.settings = config.verdict
        self.root, self.s3 = config.root, config.s3.settings()
        self.pipeline = pipeline
        self.metrics = metrics
        self.receivers = [build(receiver) for receiver in self.settings.receivers]
        self.book = IncidentBook(os.path.join(state_dir, "verdicts"))
        self.outages = OutageBook(os.path.join(state_dir, "verdicts"))
        host, port = config.listen_address()
        self.report_base = (self.settings.report_url or default_report_url(host, port, bool(config.tls_cert))).rstrip("/")
        self._jobs: dict[str, _JobState] = {}
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._next_maintenance = 0.0
        metrics.archive_open_incidents.set(self.book.open_count())

    @property
    def enabled(self) -> bool:
        return bool(self.receivers)

    def report_url(self, incident: Incident) -> str:
        return f"{self.report_base}/v1/reports/{incident.id}"

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> None:
        if self.enabled and self._thread is None:
            for incident in self.book.incidents.values():  # a restart resumes open incidents' deliveries
                if incident.open:
                    self._jobs.setdefault(incident.job, _JobState())
            self._thread = threading.Thread(target=self._work, name="archive-verdicts", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- triggers (request threads) -----------------------------------------------------------------
    def notify(self, notification: Notification) -> dict[str, Any]:
        """Take a notification; what became of its alerts (the HTTP answer)."""
        source = "agent" if notification.from_agent else "alertmanager"
        self.metrics.archive_alert_notifications.labels(source=source).inc()
        if not self.enabled:
            return {"accepted": 0, "ignored": len(notification.alerts),
                    "note": "verdicts are off: no verdict.receivers configured"}
        down = [a for a in notification.alerts if a.alertname == AGENT_DOWN_ALERT and not a.from_agent]
        if down:
            self._agents_down(down, source)
        firing = [a for a in notification.alerts if a.status == FIRING and a.training_job is not None]
        jobs_firing = {a.training_job for a in firing}
        closed = []
        if notification.status == RESOLVED:
            for job in {a.training_job for a in notification.alerts if a.training_job is not None} - jobs_firing:
                incident = self.book.current(job)
                if incident is not None:
                    self.book.close(incident, "Alertmanager resolved every alert of the job")
                    closed.append(incident.id)
        incidents = {}
        now = time.time_ns()
        for alert in firing:
            trigger = {"alertname": alert.alertname, "rank": alert.rank, "instance": alert.instance,
                       "signature": alert.signature, "source": source, "received_ns": now}
            incident, opened = self.book.join(alert.training_job, trigger, alert.starts_at_ns,
                                              alerted=not alert.from_agent)
            if opened:
                log.info("incident %s opened for job %s by %s (%s)", incident.id, alert.training_job or "-",
                         alert.alertname, source)
            incidents[incident.id] = alert.training_job
            self._schedule(alert.training_job, self.settings.settle if alert.from_agent else 0.0)
        if firing or closed:
            self.book.save()
            self.metrics.archive_open_incidents.set(self.book.open_count())
        return {"accepted": len(firing) + len(down), "ignored": len(notification.alerts) - len(firing) - len(down),
                "incidents": sorted(incidents), "closed": closed}

    def _agents_down(self, alerts: list[AlertEvent], source: str) -> None:
        """Record agent outages; one that starts re-triages every open incident and is a suspect of
        the records that name no job (see the module docstring)."""
        opened = self.outages.take(alerts)
        if not opened:
            return
        now = time.time_ns()
        for outage in opened:
            trigger = {"alertname": AGENT_DOWN_ALERT, "rank": None, "instance": outage.host, "signature": None,
                       "source": source, "received_ns": now}
            self.book.join("", trigger, outage.since_ns, alerted=False)
        with self.book.lock:
            jobs = {incident.job for incident in self.book.incidents.values() if incident.open}
        for job in jobs:
            self._schedule(job, 0.0)
        self.book.save()

    def _schedule(self, job: str, delay: float) -> None:
        with self._cond:
            state = self._jobs.setdefault(job, _JobState())
            due = max(time.monotonic() + delay, state.last_run + self.settings.retriage_interval)
            state.due = due if state.due is None else min(state.due, due)
            self._cond.notify_all()

    # -- the worker ---------------------------------------------------------------------------------
    def _work(self) -> None:
        while True:
            with self._cond:
                if self._stopping:
                    return
                job, wait = self._next_due()
                if job is None:
                    self._cond.wait(min(wait, max(0.0, self._next_maintenance - time.monotonic())) + 0.001)
            if job is not None:
                self._guarded(self._triage, job)
            if time.monotonic() >= self._next_maintenance:
                self._next_maintenance = time.monotonic() + MAINTENANCE
                self._guarded(self._maintain)

    def _next_due(self) -> tuple[str | None, float]:
        now = time.monotonic()
        due = [(state.due, job) for job, state in self._jobs.items() if state.due is not None]
        if not due:
            return None, MAINTENANCE
        when, job = min(due)
        if when > now:
            return None, when - now
        self._jobs[job].due = None
        self._jobs[job].last_run = now
        return job, 0.0

    def _guarded(self, work, *args) -> None:
        try:
            work(*args)
        except Exception:
            log.exception("verdict work failed (the next trigger tries again)")

    def _triage(self, job: str) -> None:
        incident = self.book.current(job)
        if incident is None:
            return
        started = time.perf_counter()
        if not self.pipeline.wait_visible(self.pipeline.wal.last_seq, VISIBLE_TIMEOUT):
            log.warning("records acknowledged before the trigger are not all readable yet; triaging job %s anyway",
                        job or "-")
        start_ns = incident.window_start_ns - int(self.settings.lookback * 1e9)
        try:
            judgement = judge(self.root, self.s3, job, start_ns, self.outages.outages())
        except Exception as exc:
            self.metrics.archive_triage_runs.labels(status="error").inc()
            log.error("triage of job %s for incident %s failed: %s", job or "-", incident.id,
                      str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            return
        self.metrics.archive_triage_runs.labels(status=judgement.status).inc()
        found = judgement.triage.job if judgement.triage is not None else None
        if not job and found:
            owner = self.book.adopt(incident, found)
            if owner is not incident:  # the job already has an incident: that one is triaged and sent
                self._schedule(found, 0.0)
                self.book.save()
                return
            job = found
        wanted = judgement.status in SEND_STATUSES
        if wanted:
            report_seconds = report(judgement, self.book.report_path(incident.id))
            judgement.timings["report"] = report_seconds
        self.metrics.archive_triage_seconds.observe(time.perf_counter() - started)
        with self.book.lock:
            incident.last_status = judgement.status
            if wanted:
                fields = verdict_fields(judgement.triage)
                if incident.verdict is None or fingerprint(fields) != fingerprint(incident.verdict):
                    incident.previous, incident.verdict = incident.verdict, fields
                    incident.revision += 1
                    log.info("incident %s of job %s: verdict revision %d: %s", incident.id, job or "-",
                             incident.revision, fields["summary"])
        log.debug("triage of job %s: %s over %d file(s) in %.2fs (%s)", job or "-", judgement.status,
                  judgement.files, time.perf_counter() - started, judgement.timings)
        if not wanted and not incident.revision and not incident.alerted:
            waited = (time.time_ns() - incident.opened_ns) / 1e9
            if waited < self.settings.suspect_wait:
                self._schedule(job, SUSPECT_RETRY)
            else:
                self.book.close(incident, f"a suspect whose triage found {judgement.status} for {waited:.0f}s")
        self._deliver(incident)
        self.book.save()
        self.metrics.archive_open_incidents.set(self.book.open_count())

    def _deliver(self, incident: Incident) -> None:
        for receiver in self.receivers:
            with self.book.lock:
                if incident.verdict is None or incident.delivered.get(receiver.name, 0) >= incident.revision:
                    continue
                kind = "update" if receiver.name in incident.delivered else "verdict"
                doc = document(incident.verdict, incident, kind, self.report_url(incident),
                               incident.previous if kind == "update" else None)
                state = dict(incident.receiver_state.get(receiver.name, {}))
            try:
                state = receiver.deliver(doc, state)
            except DeliveryError as exc:
                self.metrics.archive_verdict_delivery_failures.labels(receiver=receiver.name).inc()
                log.error("verdict of incident %s not delivered to %s: %s (tried again in %.0fs)", incident.id,
                          receiver.name, exc, MAINTENANCE)
                continue
            now = time.time_ns()
            with self.book.lock:
                incident.receiver_state[receiver.name] = state
                incident.delivered[receiver.name] = doc["revision"]
                if incident.first_sent_ns is None:
                    incident.first_sent_ns = now
                    self.metrics.archive_verdict_latency_seconds.observe((now - incident.opened_ns) / 1e9)
            self.metrics.archive_verdicts_sent.labels(receiver=receiver.name, kind=kind).inc()
            log.info("incident %s: %s revision %d delivered to %s", incident.id, kind, doc["revision"], receiver.name)

    def _maintain(self) -> None:
        expired = self.book.expire(self.settings.incident_ttl, self.settings.report_retention)
        names = [r.name for r in self.receivers]
        behind = [i for i in list(self.book.incidents.values()) if i.open and i.pending(names)]
        for incident in behind:
            self._deliver(incident)
        if expired or behind:
            self.book.save()
        self.metrics.archive_open_incidents.set(self.book.open_count())
