"""Agent outages: when a node's shipping agent was down, as Prometheus saw it (``RanklogAgentDown``).

Two parts share this contract. The archive's verdict service learns outages from Alertmanager's
notifications: the alertmanager role routes ``RanklogAgentDown`` to ``/v1/alerts`` as context, in
addition to the page and never instead of it. Triage reads them as evidence: an agent that went down
right after every rank of its node stopped is the strongest sign that the machine itself was lost
(:mod:`ranklog.triage.node_loss`), not only its processes.

An outage names the agent's host: the alert's ``node`` label (the prometheus role labels every
scrape target with its inventory hostname, which is also what the agent role makes the agent call
its records' host), else a ``host`` label, else the ``instance`` without its port. Hosts compare
case-insensitively, and a short name matches its FQDN (``node1`` is ``node1.cluster.local``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

AGENT_DOWN_ALERT = "RanklogAgentDown"


@dataclass(frozen=True)
class AgentOutage:
    host: str
    since_ns: int  # the alert's startsAt: the agent went down (at most the alert's `for` plus a scrape) before
    until_ns: int | None = None  # when Alertmanager said it resolved; None while it is down


def outage_host(labels: Mapping[str, str]) -> str | None:
    """The host an agent-down alert is about (see the module docstring), None when it names none."""
    for key in ("node", "host"):
        if labels.get(key):
            return labels[key]
    instance = labels.get("instance") or ""
    if instance.startswith("["):  # [v6 address]:port
        return instance[1:].split("]", 1)[0] or None
    return instance.rsplit(":", 1)[0] if instance.count(":") == 1 else instance or None


def same_host(a: str, b: str) -> bool:
    """`a` and `b` name one machine: equal ignoring case, or one is the other's short name."""
    a, b = a.lower(), b.lower()
    return a == b or a.split(".", 1)[0] == b or b.split(".", 1)[0] == a


def outages_of(host: str, outages: Iterable[AgentOutage]) -> list[AgentOutage]:
    return [o for o in outages if same_host(o.host, host)]
