"""torchrun: the global rank of records that know only their node and local rank.

A torchrun ``--log-dir`` file (``attempt_N/<local_rank>/stderr.log``) and a ``[default1]:`` line of
the launcher's console say which *local* rank wrote them; the global rank is ``group_rank × nproc +
local_rank``, and only the launcher knows the group (node) rank. Two things in the logs tie them:

- torchrun's rendezvous result (``LOGLEVEL=INFO``): ``local_ranks=[0, 1]`` / ``global_ranks=[2, 3]``
  lines of one node's launcher pair each local rank with its global rank (lines of one record: the
  parser reads the result, logged as one multi-line message, as one);
- torch's own ``[rank3]:`` prefixes (tracebacks of a failing worker) give a record its global rank;
  the same node's other records of that local rank take it too.

The map is (host, local rank) → global rank, used only where it is unambiguous (one global rank per
pair); with one node, the local rank is the rank (:mod:`.gather`). Nothing here runs unless some
record has a local rank but no rank, on more than one host.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

_RANK_LIST = re.compile(r"^\s*(local|global)_ranks=\[([\d,\s]*)\]\s*$")
MAP_TABLE = "torchrun_rank_map"


def rank_map(con: duckdb.DuckDBPyConnection, view: str) -> dict[tuple[str, int], int]:
    """(host, local rank) → global rank, from the records of `view` (see the module docstring)."""
    pairs: dict[tuple[str, int], set[int]] = {}
    rows = con.execute(f"""
        SELECT host, local_rank, rank FROM {view}
        WHERE rank IS NOT NULL AND local_rank IS NOT NULL GROUP BY ALL""").fetchall()
    for host, local_rank, rank in rows:
        pairs.setdefault((host, local_rank), set()).add(rank)
    lists = con.execute(f"""
        SELECT host, source, "offset", msg FROM {view}
        WHERE regexp_matches(msg, '(^|\n)\\s*(local|global)_ranks=\\[') ORDER BY host, source, "offset" """).fetchall()
    local: dict[tuple[str, str], list[int]] = {}
    for host, source, _offset, msg in lists:
        for line in msg.splitlines():  # (one record a line, or the rendezvous result as one record)
            match = _RANK_LIST.match(line)
            if match is None:
                continue
            numbers = [int(x) for x in match.group(2).replace(" ", "").split(",") if x]
            if match.group(1) == "local":
                local[(host, source)] = numbers
            elif (host, source) in local and len(local[(host, source)]) == len(numbers):
                for lr, gr in zip(local.pop((host, source)), numbers, strict=True):
                    pairs.setdefault((host, lr), set()).add(gr)
    return {key: next(iter(ranks)) for key, ranks in pairs.items() if len(ranks) == 1}


def register(con: duckdb.DuckDBPyConnection, mapping: dict[tuple[str, int], int]) -> None:
    import pyarrow as pa

    hosts, local_ranks, ranks = zip(*((h, lr, r) for (h, lr), r in mapping.items()), strict=True)
    table = pa.table({"host": pa.array(hosts, pa.string()), "local_rank": pa.array(local_ranks, pa.int32()),
                      "rank": pa.array(ranks, pa.int32())})
    con.register(MAP_TABLE, table)


def joined_sql(view: str) -> str:
    """`view` with the mapped global rank where a record has none."""
    return (f"SELECT r.* REPLACE (coalesce(r.rank, m.rank) AS rank) FROM {view} r "
            f"LEFT JOIN {MAP_TABLE} m ON r.rank IS NULL AND r.host = m.host AND r.local_rank = m.local_rank")
