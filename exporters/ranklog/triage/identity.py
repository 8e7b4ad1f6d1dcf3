"""Who wrote a record, for triage: what only a record's text says about another process.

The rules that lend rank, role, pid and host across files are shared with every other reader
(:mod:`ranklog.source_identity`); triage runs them over its summary scan (:mod:`.gather`). Two
kinds of evidence live in the *text* of Ray's records, about processes other than their writer, so
triage reads them from the few records that can hold them and hands them to the rules as evidence:

- **actor names**: text-mode workers never write their actor's name; Ray's errors about them do,
  beside the pid: ``ray::trainer_2:Trainer.__init__() (pid=27861, …)`` and ActorDiedError's
  ``pid: 29441`` / ``name: trainer_1`` lines. The name goes to the pid's records (the fuller name
  wins over the class: ``Trainer`` → ``trainer_1``).
- **the node of a copied folder**: Ray's raylet says which machine its session folder belongs to
  (``Raylet of id, <node_id> started. … hostname: <host>``), for records read without a host, in
  that ``logs/`` folder or below it (Ray Train's ``logs/train/``). (The parse stage reads the same
  line when it parses the raylet's file; records of an older archive or of a table built elsewhere
  are covered here.)
- **Ray Train (V2) world ranks**: the controller lists its worker group
  (``- (ip=10.0.0.2, pid=8740) world_rank=2, local_rank=2, node_rank=0``): the pid's records get
  that rank (its ``.err`` file, the driver's forwarded lines). (A worker's own JSON records in
  ``logs/train/`` carry ``world_rank`` as their rank from the parse stage.)

And **worker id → pid**: Ray names a worker's files after its worker id and pid
(``worker-<worker_id>-<job>-<pid>.err``, ``python-core-worker-<worker_id>_<pid>.log``), and the GCS
and raylet name a dead worker by its worker id only (``worker id = …``, ``Worker ID: …``):
:mod:`.evidence` follows the id to the pid, and the pid to the rank.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..source_identity import UNKNOWN_HOST, Group, known_host, raylet_host

if TYPE_CHECKING:
    import duckdb

_NAMED_TASK = re.compile(r"ray::(?P<name>\S+):(?P<cls>\w+)\.\w+\(\)\s*\(pid=(?P<pid>\d+)")
_DIED_ACTOR = re.compile(r"\bpid: (?P<pid>\d+)\s*\n\s*name: (?P<name>\S+)")
_WORKER_GROUP = re.compile(r"\bpid=(?P<pid>\d+)\)\s*world_rank=(?P<rank>\d+)")
_WORKER_FILE = re.compile(r"(?:^|/)(?:python-core-)?worker-(?P<worker_id>[0-9a-f]{16,})[-_](?:[0-9a-f]+-)?(?P<pid>\d+)\.\w+$")


def evidence(con: duckdb.DuckDBPyConnection, view: str, observations: list[Group]) -> list[Group]:
    """Observations read from Ray's texts (see the module docstring), only where some record can gain."""
    if not any(o.format == "ray" for o in observations):
        return []
    found = _names_from_errors(con, view)
    if any(o.rank is None for o in observations):
        found += _world_ranks(con, view)
    if any(not known_host(o.host) for o in observations):
        found += _raylet_hosts(con, view)
    return found


def _names_from_errors(con: duckdb.DuckDBPyConnection, view: str) -> list[Group]:
    """pid → actor name from Ray's error texts that name both."""
    rows = con.execute(
        f"SELECT source_id, source, host, epoch_ns(ts), msg, exc FROM {view} WHERE format = 'ray' "
        "AND level IN ('ERROR', 'CRITICAL', 'UNKNOWN') "
        "AND (contains(msg, 'ray::') OR contains(msg, 'ActorDiedError') OR contains(exc, 'ray::'))").fetchall()
    out = []
    for source_id, source, host, ts, msg, exc in rows:
        text = f"{msg or ''}\n{exc or ''}"
        for pattern in (_NAMED_TASK, _DIED_ACTOR):
            for match in pattern.finditer(text):
                out.append(Group(source_id, host if known_host(host) else None, int(match["pid"]), role=match["name"],
                                 source=source, format="ray", first_ns=ts, last_ns=ts))
    return out


def _world_ranks(con: duckdb.DuckDBPyConnection, view: str) -> list[Group]:
    """pid → Ray Train world rank from the controller's worker-group listing (host left to the
    pid's own records: the listing names the worker's ip, not its host)."""
    rows = con.execute(f"SELECT source_id, source, min(epoch_ns(ts)), max(epoch_ns(ts)), msg FROM {view} "
                       "WHERE format = 'ray' AND contains(msg, 'world_rank=') GROUP BY ALL").fetchall()
    out = []
    for source_id, source, first, last, msg in rows:
        for match in _WORKER_GROUP.finditer(msg or ""):
            out.append(Group(source_id, None, int(match["pid"]), rank=int(match["rank"]), source=source,
                             format="ray", first_ns=first, last_ns=last))
    return out


def _raylet_hosts(con: duckdb.DuckDBPyConnection, view: str) -> list[Group]:
    """The host each copied session folder's raylet names."""
    rows = con.execute(
        f"SELECT DISTINCT source_id, source, msg FROM {view} WHERE host = '{UNKNOWN_HOST}' AND format = 'ray' "
        "AND starts_with(msg, 'Raylet of id')").fetchall()
    out = []
    for source_id, source, msg in rows:
        found = raylet_host(msg or "")
        if found is not None:
            out.append(Group(source_id, found[0], source=source, format="ray"))
    return out


def worker_pids(con: duckdb.DuckDBPyConnection, view: str) -> dict[str, int]:
    """Ray worker id -> pid, from the names of the workers' files."""
    out: dict[str, int] = {}
    for (source,) in con.execute(f"SELECT DISTINCT source FROM {view} WHERE format = 'ray'").fetchall():
        found = _WORKER_FILE.search(source or "")
        if found:
            out[found["worker_id"]] = int(found["pid"])
    return out
