"""Incidents: one per training job while it is failing, so a job pages once and is updated after.

An incident opens with the first firing alert or suspect of a job that has none open, and carries a
random id (22 URL-safe characters: the report link's only credential, like a pre-signed URL).
Every later alert or suspect of the job joins it and triggers a re-triage; a verdict that changes
(:func:`.document.fingerprint`) gets a new ``revision`` and is sent as an update. It closes when
Alertmanager says every alert of the job resolved, or ``incident_ttl`` after its last trigger; the
job's next trigger then opens a new incident (and pages).

The book is saved as JSON under ``<state_dir>/verdicts/incidents.json`` after every change (atomic
replace), so a restarted archive neither pages again for an open incident nor forgets an
annotation it must update. Closed incidents are kept for ``report_retention`` (the list at
``GET /v1/alerts``), then forgotten with their reports.

Alerts whose records name no job (``training_job=""``: a launcher's per-rank files before their job
is known) open an incident of job ``""``; its triage picks the job the records belong to, and the
incident is adopted by that job (:meth:`IncidentBook.adopt`) before anything is sent, so one failure
seen under both labels still pages once.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ..storage import write_atomic

log = logging.getLogger("ranklog.archive.verdicts")
BOOK_FILE = "incidents.json"
TRIGGERS_KEPT = 50


@dataclass
class Incident:
    id: str
    job: str  # the alerts' training_job ("" for records that name no job)
    opened_ns: int  # when the first trigger arrived here
    window_start_ns: int  # the earliest alert start / failure line seen: triage reads from lookback before it
    last_trigger_ns: int
    triggers: list[dict[str, Any]] = field(default_factory=list)
    alerted: bool = False  # an Alertmanager alert joined (not only agents' suspects)
    revision: int = 0  # bumped when the verdict changes
    verdict: dict[str, Any] | None = None  # verdict_fields of the current revision
    previous: dict[str, Any] | None = None  # … of the revision before
    delivered: dict[str, int] = field(default_factory=dict)  # receiver → revision it has
    receiver_state: dict[str, dict[str, Any]] = field(default_factory=dict)  # e.g. grafana's annotation id
    first_sent_ns: int | None = None
    last_status: str | None = None  # the last triage's status, sent or not
    closed_ns: int | None = None
    closed_because: str | None = None

    @property
    def open(self) -> bool:
        return self.closed_ns is None

    def pending(self, receivers: list[str]) -> list[str]:
        """Receivers still behind the current revision."""
        if not self.revision:
            return []
        return [name for name in receivers if self.delivered.get(name, 0) < self.revision]


class IncidentBook:
    """Every incident of this archive, by id, with at most one open per job (thread-safe)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.path = os.path.join(directory, BOOK_FILE)
        self.lock = threading.RLock()
        self.incidents: dict[str, Incident] = {}
        os.makedirs(os.path.join(directory, "reports"), exist_ok=True)
        self._load()

    def _load(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as handle:
                saved = json.load(handle)
        except FileNotFoundError:
            return
        except (OSError, ValueError) as exc:
            log.error("cannot read %s (%s): starting with no incidents (open ones may page again)", self.path, exc)
            return
        names = {f.name for f in dataclasses.fields(Incident)}
        for item in saved.get("incidents", []):
            incident = Incident(**{k: v for k, v in item.items() if k in names})
            self.incidents[incident.id] = incident

    def save(self) -> None:
        with self.lock:  # one writer at a time: write_atomic's temp file has one name
            data = json.dumps({"incidents": [dataclasses.asdict(i) for i in self.incidents.values()]})
            write_atomic(self.path, data.encode())

    def report_path(self, incident_id: str) -> str:
        return os.path.join(self.directory, "reports", f"{incident_id}.html")

    def current(self, job: str) -> Incident | None:
        with self.lock:
            return next((i for i in self.incidents.values() if i.open and i.job == job), None)

    def join(self, job: str, trigger: dict[str, Any], event_ns: int | None, alerted: bool) -> tuple[Incident, bool]:
        """The job's open incident with `trigger` added, or a new one; (incident, opened now)."""
        now = time.time_ns()
        with self.lock:
            incident = self.current(job)
            opened = incident is None
            if incident is None:
                incident = Incident(secrets.token_urlsafe(16), job, now, now, now)
                self.incidents[incident.id] = incident
            if event_ns is not None and 0 < event_ns < incident.window_start_ns:
                incident.window_start_ns = event_ns
            incident.last_trigger_ns = now
            incident.alerted = incident.alerted or alerted
            incident.triggers = [*incident.triggers, trigger][-TRIGGERS_KEPT:]
            return incident, opened

    def adopt(self, incident: Incident, job: str) -> Incident:
        """`incident` (opened by alerts naming no job) belongs to `job`, which triage found: it becomes
        that job's incident, or joins the one the job already has (and closes). The job's incident."""
        with self.lock:
            owner = self.current(job)
            if owner is None:
                incident.job = job
                return incident
            owner.triggers = [*owner.triggers, *incident.triggers][-TRIGGERS_KEPT:]
            owner.window_start_ns = min(owner.window_start_ns, incident.window_start_ns)
            owner.last_trigger_ns = max(owner.last_trigger_ns, incident.last_trigger_ns)
            owner.alerted = owner.alerted or incident.alerted
            self.close(incident, f"its records belong to job {job}: merged into incident {owner.id}")
            return owner

    def close(self, incident: Incident, because: str) -> None:
        with self.lock:
            if incident.open:
                incident.closed_ns = time.time_ns()
                incident.closed_because = because
                log.info("incident %s of job %s closed (%s)", incident.id, incident.job or "-", because)

    def expire(self, ttl_s: float, retention_s: float) -> list[Incident]:
        """Close incidents quiet for `ttl_s`; forget closed ones (and their reports) older than `retention_s`."""
        now = time.time_ns()
        closed = []
        with self.lock:
            for incident in list(self.incidents.values()):
                if incident.open and now - incident.last_trigger_ns > ttl_s * 1e9:
                    self.close(incident, f"no alert or suspect for {ttl_s:g}s")
                    closed.append(incident)
                elif not incident.open and now - (incident.closed_ns or now) > retention_s * 1e9:
                    del self.incidents[incident.id]
                    try:
                        os.unlink(self.report_path(incident.id))
                    except FileNotFoundError:
                        pass
        return closed

    def open_count(self) -> int:
        with self.lock:
            return sum(1 for i in self.incidents.values() if i.open)

    def listing(self) -> list[dict[str, Any]]:
        """Every incident, newest first (``GET /v1/alerts``)."""
        with self.lock:
            items = sorted(self.incidents.values(), key=lambda i: -i.opened_ns)
            return [dataclasses.asdict(i) for i in items]
