"""Reading the archive's answers beyond their status: the duplicate count of an ACK, and the hosts a
403 ``host_not_allowed`` names (a token bound to a node identity, see ``ranklog.archive.auth``).

Two uses in :mod:`.ship`:

* unexpected duplicates — the ACK says how many records the archive already held. A record this
  agent may have sent before (bytes below a file's size when this process first saw it: a restart's
  re-send; or a request whose earlier attempt timed out or failed after it may have been stored) is
  an expected duplicate. Any other duplicate means the archive holds data under this node's keys that
  this agent never sent — another client writing with a shared token, or a key collision: those
  records were *not* stored. Counted in ``ranklog_agent_unexpected_duplicates_total``, logged, alerted.
* re-hosting — a record whose ``host`` came from the line itself (a container's host name in a
  ranklog JSON line) may name a host this node's bound token may not write. The archive refuses the
  whole request naming those hosts; the agent sends it again with this node's name in ``host`` and the
  line's own value kept in ``attrs.line_host``, so nothing is lost and no batch stalls.
"""

from __future__ import annotations

import json
from typing import Any

HOST_NOT_ALLOWED = "host_not_allowed"


def _json(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def duplicates_in(answer: str) -> int:
    """The `duplicates` count of an ingest ACK (0 when absent or not a count)."""
    value = _json(answer).get("duplicates", 0)
    return value if type(value) is int and value > 0 else 0


def refused_hosts(answer: str) -> list[str] | None:
    """The hosts of a 403 ``host_not_allowed`` answer, or None for any other refusal."""
    body = _json(answer)
    hosts = body.get("hosts")
    if body.get("reason") != HOST_NOT_ALLOWED or not isinstance(hosts, list):
        return None
    return [h for h in hosts if isinstance(h, str)]


def rehost(table, hosts: list[str], own_host: str):
    """`table` with the records of `hosts` under `own_host`; each one's own host moves to attrs.line_host."""
    import pyarrow as pa
    import pyarrow.compute as pc

    mask = pc.fill_null(pc.is_in(table["host"], pa.array(hosts, pa.string())), False)
    if not pc.any(mask).as_py():
        return table
    attrs = table["attrs"].to_pylist()
    claimed = table["host"].to_pylist()
    for row in [i for i, hit in enumerate(mask.to_pylist()) if hit]:
        merged = _json(attrs[row]) if attrs[row] else {}
        if attrs[row] and not merged and attrs[row].strip() != "{}":
            merged = {"attrs": attrs[row]}  # not an object (never written by ranklog): kept whole
        merged["line_host"] = claimed[row]
        attrs[row] = json.dumps(merged, ensure_ascii=False, separators=(",", ":"))
    table = table.set_column(table.schema.get_field_index("attrs"), table.schema.field("attrs"),
                             pa.array(attrs, table.schema.field("attrs").type))
    host_type = table.schema.field("host").type
    return table.set_column(table.schema.get_field_index("host"), table.schema.field("host"),
                            pc.if_else(mask, pa.scalar(own_host, host_type), table["host"]))
