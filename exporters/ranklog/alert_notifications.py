"""Alertmanager's webhook notification: the one shape ``POST /v1/alerts`` takes.

Two writers send it. Alertmanager, through a ``webhook_configs`` receiver (its documented payload,
``version: "4"``: ``status``, ``receiver``, ``groupLabels``, ``alerts[]`` with ``status``, ``labels``,
``annotations``, ``startsAt``, ``endsAt``, ``fingerprint``). And the agent, which sends a *suspect*
the moment it reads a failure line, so the verdict does not wait for a scrape: the same shape with
one alert named :data:`SUSPECT_ALERT` and ``receiver`` :data:`AGENT_RECEIVER`. One shape means one
parser and one path through the archive; this module is the contract both sides import.

The labels that matter are ranklog's alert labels (``dashboards/rules.py``): ``training_job``,
``rank``, ``instance``, ``signature``. Anything else is kept in ``labels`` and ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .record import format_ts, parse_ts

ALERTS_PATH = "/v1/alerts"
SUSPECT_ALERT = "RanklogFailureSuspected"
AGENT_RECEIVER = "ranklog-agent"
WEBHOOK_VERSION = "4"
FIRING, RESOLVED = "firing", "resolved"


class NotificationError(ValueError):
    """The body is not an Alertmanager webhook notification (the message says what it is instead)."""


@dataclass(frozen=True)
class AlertEvent:
    """One alert of a notification, as the verdict service reads it."""

    alertname: str
    status: str  # firing | resolved
    training_job: str | None  # None: the alert is not about a training job (no such label)
    rank: str | None
    instance: str | None
    signature: str | None
    starts_at_ns: int | None
    from_agent: bool  # a suspect pushed by an agent, not an alert Alertmanager fired
    labels: dict[str, str] = field(default_factory=dict)
    ends_at_ns: int | None = None  # a resolved alert's end (a firing one's endsAt is Alertmanager's guess)


@dataclass(frozen=True)
class Notification:
    status: str
    receiver: str
    alerts: list[AlertEvent]

    @property
    def from_agent(self) -> bool:
        return self.receiver == AGENT_RECEIVER


def parse(body: bytes) -> Notification:
    """The notification in `body`; :class:`NotificationError` naming what is wrong (or what it is)."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        raise NotificationError("the body is not JSON (Alertmanager's webhook sends a JSON object)") from None
    if not isinstance(data, dict):
        raise NotificationError("expected a JSON object (Alertmanager's webhook notification)")
    alerts = data.get("alerts")
    if not isinstance(alerts, list):
        raise NotificationError('no "alerts" list: this is not an Alertmanager webhook notification')
    receiver = str(data.get("receiver") or "")
    from_agent = receiver == AGENT_RECEIVER
    events = [_event(alert, index, from_agent) for index, alert in enumerate(alerts)]
    return Notification(str(data.get("status") or FIRING), receiver, events)


def _event(alert: Any, index: int, from_agent: bool) -> AlertEvent:
    if not isinstance(alert, dict) or not isinstance(alert.get("labels"), dict):
        raise NotificationError(f"alerts[{index}]: expected an object with a labels object")
    labels = {str(k): str(v) for k, v in alert["labels"].items()}
    if "alertname" not in labels:
        raise NotificationError(f"alerts[{index}]: no alertname label")
    status = str(alert.get("status") or FIRING)
    if status not in (FIRING, RESOLVED):
        raise NotificationError(f"alerts[{index}]: status {status!r} is neither firing nor resolved")
    return AlertEvent(labels["alertname"], status, labels.get("training_job"), labels.get("rank") or None,
                      labels.get("instance") or None, labels.get("signature") or None,
                      parse_ts(alert.get("startsAt")), from_agent, labels,
                      parse_ts(alert.get("endsAt")) if status == RESOLVED else None)


def suspect(training_job: str | None, rank: int | None, host: str, signature: str, ts_ns: int,
            instance: str = "") -> dict[str, Any]:
    """The notification an agent sends for a failure line it just read (see the module docstring)."""
    labels = {"alertname": SUSPECT_ALERT, "training_job": training_job or "", "rank": "" if rank is None else str(rank),
              "host": host, "signature": signature}
    if instance:
        labels["instance"] = instance
    return {"version": WEBHOOK_VERSION, "groupKey": f"suspect:{training_job or ''}", "status": FIRING,
            "receiver": AGENT_RECEIVER, "groupLabels": {},
            "commonLabels": labels, "commonAnnotations": {}, "externalURL": "",
            "alerts": [{"status": FIRING, "labels": labels, "annotations": {}, "startsAt": format_ts(ts_ns),
                        "endsAt": "0001-01-01T00:00:00Z", "generatorURL": "", "fingerprint": ""}]}
