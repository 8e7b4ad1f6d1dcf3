"""Which rank never entered the collective its peers waited in, from PyTorch Flight Recorder dumps.

ranklog's in-process library writes each rank's dump as one record (:mod:`ranklog.log.flight_recorder`:
``logger`` ``ranklog.flight_recorder``, torch's dump under ``attrs.flight_recorder``). A dump lists the
rank's recent collectives per process group (``collective_seq_id``, ``profiling_name`` such as
``gloo:all_reduce`` or ``nccl:all_reduce``) and, per group, the last collective the rank enqueued
(``pg_status``). Collectives run in the same order on every rank of a group, so when a group's ranks
stopped at different sequence numbers, the ranks behind never entered collective N, the one the
others were waiting in: the hang's root cause.

The dumps are read in DuckDB (a dump holds up to ``TORCH_FR_BUFFER_SIZE`` entries; only the numbers
per rank and group come back to Python). They are no log lines: the rest of triage never sees them
(:meth:`.gather.TriageData._own_records`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .templates import describe_ranks

if TYPE_CHECKING:
    from .gather import TriageData

LOGGER = "ranklog.flight_recorder"  # the logger of ranklog.log.flight_recorder's records


@dataclass(frozen=True)
class Stuck:
    """A process group whose ranks stopped at different collectives."""

    group: str  # the process group's id (and description, when torch gives one)
    seq: int  # the collective the ahead ranks entered and the others never did
    op: str  # its name, e.g. "gloo:all_reduce"
    entered: list[int]  # ranks whose recorder holds collective `seq`
    missing: list[int]  # ranks whose recorder stops before it
    last_seq: dict[int, int]  # rank -> the last collective it entered in this group

    def describe(self) -> str:
        return (f"{describe_ranks(self.missing)} never entered {self.op} #{self.seq} (collective_seq_id) of process "
                f"group {self.group}, which {describe_ranks(self.entered)} entered and waited in")


def stuck_groups(data: TriageData, where: str) -> list[Stuck]:
    """Process groups whose ranks' dumps stop at different collectives, the fewest missing ranks
    first (the most specific answer; `where`: the selection's SQL condition over ``all_records``)."""
    rows = data.con.execute(f"""
        WITH dumps AS (
            SELECT rank, attrs FROM all_records
            WHERE logger = '{LOGGER}' AND rank IS NOT NULL {("AND " + where) if where else ""}
        ), entries AS (
            SELECT rank, unnest(json_extract(attrs, '$.flight_recorder.entries[*]')) AS e FROM dumps
        ), collectives AS (
            SELECT rank, e->>'pg_id' AS pg, coalesce(e->'process_group'->>1, '') AS pg_desc,
                   TRY_CAST(e->>'collective_seq_id' AS BIGINT) AS seq, e->>'profiling_name' AS op
            FROM entries WHERE NOT coalesce(TRY_CAST(e->>'is_p2p' AS BOOLEAN), false)
        )
        SELECT pg, any_value(pg_desc), rank, max(seq), arg_max(op, seq) FROM collectives
        WHERE seq IS NOT NULL AND seq > 0 GROUP BY pg, rank ORDER BY pg, rank""").fetchall()
    groups: dict[str, dict[int, tuple[int, str]]] = {}
    names: dict[str, str] = {}
    for pg, desc, rank, seq, op in rows:
        groups.setdefault(pg, {})[int(rank)] = (int(seq), op or "collective")
        names[pg] = f"{pg} ({desc})" if desc else str(pg)
    out = []
    for pg, by_rank in groups.items():
        ahead = max(seq for seq, _ in by_rank.values())
        missing = sorted(rank for rank, (seq, _) in by_rank.items() if seq < ahead)
        entered = sorted(rank for rank, (seq, _) in by_rank.items() if seq == ahead)
        if missing and entered:
            op = next(name for seq, name in by_rank.values() if seq == ahead)
            out.append(Stuck(names[pg], ahead, op, entered, missing, {r: s for r, (s, _) in by_rank.items()}))
    return sorted(out, key=lambda s: (len(s.missing), s.group))
