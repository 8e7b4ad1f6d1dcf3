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
- processes of other hosts went on after it, and reported consequences of a lost peer
  (a consequence signature: connection closed/reset, collective timeout) from that moment on.

Only in a job of two or more hosts. The verdict names the host, its ranks and each one's last line.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .evidence import Incident
    from .gather import Process

SECOND = 1_000_000_000
GAPS = 3  # "the same moment": within this many of the ranks' own typical gaps between records


@dataclass
class LostNode:
    host: str
    processes: list[Process]  # its ranks
    last_ns: int  # when it went quiet, in corrected time
    victims: list[Incident] = field(default_factory=list)  # other hosts' consequences from then on

    @property
    def ranks(self) -> list[int]:
        return sorted(p.rank for p in self.processes if p.rank is not None)


def lost_nodes(incidents: list[Incident], processes: list[Process], offsets: dict[str, int],
               uncertainty_ns: int) -> list[LostNode]:
    """The hosts that were lost (see the module docstring), the earliest first."""
    ranked = [p for p in processes if p.rank is not None]
    hosts = sorted({p.host for p in ranked})
    if len(hosts) < 2:
        return []
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
        others_end = max(p.last_ts - offsets.get(p.host, 0) for p in processes if p.host != host)
        if host_end > end + window or others_end <= end + window:
            continue
        victims = [inc for inc in incidents if inc.host != host and inc.signature is not None
                   and inc.signature.consequence and inc.adj_ts >= end - window]
        if victims:
            out.append(LostNode(host, mine, end, victims))
    return sorted(out, key=lambda node: node.last_ns)
