"""The agent outages the verdict service heard of: ``RanklogAgentDown`` firing and resolving.

Alertmanager sends the alert to ``/v1/alerts`` as context (the alertmanager role's route for
``alertmanager_ranklog_verdict_context_alerts``); triage reads the outages as evidence that a node
was lost (:mod:`ranklog.agent_outages`, :mod:`ranklog.triage.node_loss`). An outage opens with the
alert's ``startsAt`` and closes with its ``endsAt`` when Alertmanager says it resolved; a second
firing notification of an open outage (Alertmanager repeats them) changes nothing.

Saved as JSON under ``<state_dir>/verdicts/agent_outages.json`` after every change, so a restarted
archive still knows that a node's agent is down. Outages that ended :data:`KEPT_NS` ago are
forgotten (triage looks back hours, not weeks), and at most :data:`MAX_KEPT` are kept.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import threading
import time

from ...agent_outages import AgentOutage, outage_host, same_host
from ...alert_notifications import FIRING, AlertEvent
from ..storage import write_atomic

log = logging.getLogger("ranklog.archive.verdicts")
BOOK_FILE = "agent_outages.json"
KEPT_NS = 7 * 24 * 3600 * 1_000_000_000
MAX_KEPT = 1000


class OutageBook:
    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, BOOK_FILE)
        self._lock = threading.Lock()
        self._outages: list[AgentOutage] = []
        self._load()

    def take(self, events: list[AlertEvent]) -> list[AgentOutage]:
        """Record the agent-down `events`; the outages that opened now."""
        opened, closed = [], 0
        now = time.time_ns()
        with self._lock:
            for event in events:
                host = outage_host(event.labels)
                if host is None:
                    log.warning("%s without a node, host or instance label: ignored", event.alertname)
                    continue
                current = next((o for o in self._outages if o.until_ns is None and same_host(o.host, host)), None)
                if event.status == FIRING:
                    if current is None:
                        outage = AgentOutage(host, event.starts_at_ns or now)
                        self._outages.append(outage)
                        opened.append(outage)
                        log.info("the agent of %s is down since %s (Alertmanager): triage takes it as evidence",
                                 host, event.starts_at_ns)
                elif current is not None:
                    self._outages[self._outages.index(current)] = dataclasses.replace(
                        current, until_ns=event.ends_at_ns or now)
                    closed += 1
            if opened or closed:  # Alertmanager repeats a firing alert: nothing to write then
                self._outages = [o for o in self._outages
                                 if o.until_ns is None or now - o.until_ns < KEPT_NS][-MAX_KEPT:]
                data = json.dumps({"outages": [dataclasses.asdict(o) for o in self._outages]})
                write_atomic(self.path, data.encode())
        return opened

    def outages(self) -> list[AgentOutage]:
        with self._lock:
            return list(self._outages)

    def _load(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as handle:
                saved = json.load(handle)
            self._outages = [AgentOutage(**item) for item in saved.get("outages", [])]
        except FileNotFoundError:
            return
        except (OSError, ValueError, TypeError) as exc:
            log.error("cannot read %s (%s): starting with no known agent outages", self.path, exc)
