"""A lost node: every process of one machine stops at the same moment, with no word of its own.

When a machine dies (power, kernel panic, a hypervisor's kill) its logs simply stop; the ranks on
the other machines then lose their peers (gloo's ``Connection closed by peer``, NCCL's remote
errors, a collective timeout) and their launchers report those ranks as failed. Blaming the first
of those victims is the classic wrong answer. A host is lost when

- it has ranks, and all of them wrote their last record within a moment of each other (a second,
  or three of their own typical gaps between records);
- nothing of the host goes on after that moment: no rank, no launcher, no other process of it;
- no record of the host says anything went wrong (no error, no failure signature): a node that
  failed visibly is judged by what it said;
- and either processes of other hosts went on after it, and reported consequences of a lost peer
  (a consequence signature: connection closed/reset, collective timeout) from that moment on;
- or its shipping agent went down right after (an :class:`~ranklog.agent_outages.AgentOutage`: the
  ``RanklogAgentDown`` alert started at most :data:`OUTAGE_WINDOW_NS` after the host's last record,
  and not before it), while an agent of another host stayed up and the other hosts' ranks did not get
  past the step the host stopped in. That is a lost node seen before its peers notice: NCCL's ranks
  wait in the collective for their timeout (10-30 minutes) without a word. The step condition keeps
  a crashed agent on a healthy node from counting: its ranks' last *shipped* lines also stop at
  once, but the job goes on without them.

An outage that matches also corroborates the first kind. Only in a job of two or more hosts. The
verdict names the host, its ranks and each one's last line (and the outage, when there is one).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..agent_outages import AgentOutage, outages_of

if TYPE_CHECKING:
    from .evidence import Incident
    from .gather import Process

SECOND = 1_000_000_000
GAPS = 3  # "the same moment": within this many of the ranks' own typical gaps between records
# An agent-down alert starts this long after its node went quiet at most: the alert's `for` (2 m in
# dashboards/rules.py), a scrape and an evaluation interval, and the hosts' clock differences.
OUTAGE_WINDOW_NS = 10 * 60 * SECOND
OUTAGE_SKEW_NS = 10 * SECOND  # … and it may seem to start this much before the last record (clocks)


@dataclass
class LostNode:
    host: str
    processes: list[Process]  # its ranks
    last_ns: int  # when it went quiet, in corrected time
    victims: list[Incident] = field(default_factory=list)  # other hosts' consequences from then on
    outage: AgentOutage | None = None  # its agent went down right after (see the module docstring)

    @property
    def ranks(self) -> list[int]:
        return sorted(p.rank for p in self.processes if p.rank is not None)


def lost_nodes(incidents: list[Incident], processes: list[Process], offsets: dict[str, int],
               uncertainty_ns: int, outages: list[AgentOutage] | None = None) -> list[LostNode]:
    """The hosts that were lost (see the module docstring), the earliest first."""
    ranked = [p for p in processes if p.rank is not None]
    hosts = sorted({p.host for p in ranked})
    if len(hosts) < 2:
        return []
    outages = outages or []
    window = max(SECOND, uncertainty_ns)
    spoke = {inc.line.host for inc in incidents if inc.is_error}  # hosts where something said it failed
    out = []
    for host in hosts:
        mine = [p for p in ranked if p.host == host]
        lasts = [p.last_ts - offsets.get(host, 0) for p in mine]
        end = max(lasts)
        gap = statistics.median((p.last_ts - p.first_ts) // max(1, p.records - 1) for p in mine)
        if host in spoke or end - min(lasts) > max(SECOND, GAPS * gap):
            continue
        host_end = max(p.last_ts for p in processes if p.host == host) - offsets.get(host, 0)
        if host_end > end + window:
            continue
        others_end = max(p.last_ts - offsets.get(p.host, 0) for p in processes if p.host != host)
        victims = [inc for inc in incidents if inc.host != host and inc.signature is not None
                   and inc.signature.consequence and inc.adj_ts >= end - window]
        outage = _outage_after(host, end, outages)
        peers_lost_it = bool(victims) and others_end > end + window
        if peers_lost_it or (outage is not None and _others_waited(host, mine, ranked, hosts, outages, end,
                                                                   bool(victims))):
            out.append(LostNode(host, mine, end, victims, outage))
    return sorted(out, key=lambda node: node.last_ns)


def _outage_after(host: str, end_ns: int, outages: list[AgentOutage]) -> AgentOutage | None:
    """The outage of `host`'s agent that began right after its last record at `end_ns`, if any."""
    return next((o for o in sorted(outages_of(host, outages), key=lambda o: o.since_ns)
                 if end_ns - OUTAGE_SKEW_NS <= o.since_ns <= end_ns + OUTAGE_WINDOW_NS), None)


def _others_waited(host: str, mine: list[Process], ranked: list[Process], hosts: list[str],
                   outages: list[AgentOutage], end_ns: int, victims: bool) -> bool:
    """Another host's agent stayed up, and no rank elsewhere got past the step `host` stopped in (a
    synchronous job cannot go on without a node's ranks; one whose agent alone died does). Without
    step lines: the other ranks lost their peers, or went quiet too."""
    if all(_outage_after(other, end_ns, outages) is not None for other in hosts if other != host):
        return False
    others = [p for p in ranked if p.host != host]
    stopped_in = max((p.last_step for p in mine if p.last_step is not None), default=None)
    if stopped_in is None:
        return victims or max(p.last_ts for p in others) <= end_ns + OUTAGE_WINDOW_NS
    return all(p.last_step is None or p.last_step <= stopped_in + 1 for p in others)
