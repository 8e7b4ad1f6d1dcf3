"""Who wrote a record, joined across files: rank, actor name and host for the records that lack them.

One process writes to many files, and most of them do not say which rank it is. A Ray worker's
``[Rank 1]`` lines (or its JSON lines' ``actor_name``) sit in ``worker-…-<pid>.err``; its traceback
line, its ``python-core-worker-…_<pid>.log``, the driver's forwarded ``(WorkerDict pid=<pid>)``
lines and the raylet's report of its death carry only the pid. So:

- **pid → rank**: a pid whose records name exactly one rank (any file, any format) lends it to its
  rank-less records. A pid seen with two ranks (a Ray task worker reused across ranks, a pid reused on
  two hosts) lends nothing: a guess would put a failure on the wrong rank.
- **pid → role**: the fullest name any record of the pid gives (the JSON ``actor_name``
  ``kZ3xWqWorkerDict_0:1`` beats the class ``WorkerDict`` of the ``:actor_name:`` marker lines).
  Text-mode workers never write their actor's name; Ray's errors about them do, beside the pid:
  ``ray::trainer_2:Trainer.__init__() (pid=27861, …)`` and ActorDiedError's ``pid: 29441`` /
  ``name: trainer_1`` lines. Those names are lent to the pid's records too.
- **pid → host**: the one host the pid's records name, for its records that name none.
- **pid → job**: the one job the pid's records (on that host) name, for its records that name none
  (a worker's ``print`` lines beside its logger's records), so ``--job`` keeps them.
- **worker id → pid**: Ray names a worker's files after its worker id and pid
  (``worker-<worker_id>-<job>-<pid>.err``, ``python-core-worker-<worker_id>_<pid>.log``), and the GCS
  and raylet name a dead worker by its worker id only (``worker id = …``, ``Worker ID: …``):
  :mod:`.evidence` follows the id to the pid, and the pid to the rank.
- **folder → host**: Ray's raylet says which machine its session folder belongs to
  (``Raylet of id, <node_id> started. … node_manager address: <ip>:<port> … hostname: <host>``);
  every record read from that ``logs/`` folder or below it (Ray Train's ``logs/train/``) without a
  host of its own (a copied folder read with ``--log_dir``) gets it. An agent sets the host itself,
  so an archive needs no folder rule.
- **Ray Train (V2) world rank → pid**: Ray Train's own logs (``logs/train/ray-train-*-worker-*.log``,
  JSON) carry each worker's ``world_rank`` beside its pid, and its controller lists the worker group
  (``- (ip=10.0.0.2, pid=8740) world_rank=2, local_rank=2, node_rank=0``): the pid's records get
  that rank (its ``.err`` file, the driver's forwarded lines).

The join runs inside DuckDB as a view over the records, only when some record can gain something;
the driver-side rule that a ``RayTaskError``/``ActorDiedError`` naming ``pid=N`` is about pid N's
rank lives in :mod:`.evidence` and works on the joined processes.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

UNKNOWN_HOST = "unknown"
_NAMED_TASK = re.compile(r"ray::(?P<name>\S+):(?P<cls>\w+)\.\w+\(\)\s*\(pid=(?P<pid>\d+)")
_DIED_ACTOR = re.compile(r"\bpid: (?P<pid>\d+)\s*\n\s*name: (?P<name>\S+)")
_WORKER_FILE = re.compile(r"(?:^|/)(?:python-core-)?worker-(?P<worker_id>[0-9a-f]{16,})[-_](?:[0-9a-f]+-)?(?P<pid>\d+)\.\w+$")
_WORKER_GROUP = re.compile(r"\bpid=(?P<pid>\d+)\)\s*world_rank=(?P<rank>\d+)")
_RAYLET_STARTED = re.compile(
    r"Raylet of id, (?P<node>[0-9a-f]+) started\..*?node_manager address: \[?(?P<ip>[0-9A-Fa-f.:]+?)\]?:\d+"
    r".*?hostname: (?P<host>\S+)")


@dataclass
class Identity:
    """What the join lends: by pid and by source file."""

    rank_by_pid: dict[int, int] = field(default_factory=dict)
    role_by_pid: dict[int, str] = field(default_factory=dict)
    host_by_pid: dict[int, str] = field(default_factory=dict)
    host_by_source: dict[str, str] = field(default_factory=dict)
    nodes: dict[str, tuple[str, str]] = field(default_factory=dict)  # Ray node id -> (host, ip)
    pid_by_worker: dict[str, int] = field(default_factory=dict)  # Ray worker id -> pid
    job_by_pid: dict[int, str] = field(default_factory=dict)

    def merged(self, other: Identity) -> Identity:
        """This identity with what `other` adds (what was lent before stays)."""
        return Identity({**other.rank_by_pid, **self.rank_by_pid}, {**other.role_by_pid, **self.role_by_pid},
                        {**other.host_by_pid, **self.host_by_pid}, {**other.host_by_source, **self.host_by_source},
                        {**other.nodes, **self.nodes}, {**other.pid_by_worker, **self.pid_by_worker},
                        {**other.job_by_pid, **self.job_by_pid})


@dataclass(frozen=True)
class PidGroup:
    """One row of the summary as the join needs it."""

    host: str
    rank: int | None
    pid: int | None
    role: str | None
    job: str | None = None


def build_identity(con: duckdb.DuckDBPyConnection, view: str, groups: list[PidGroup]) -> Identity:
    """The identity maps from the summary `groups` (one row per host, rank, pid) and, when some
    records have no host, the raylet lines of `view`. Maps only what some record can gain."""
    ranks: dict[int, set[int]] = defaultdict(set)
    hosts: dict[int, set[str]] = defaultdict(set)
    roles: dict[int, str] = {}
    jobs: dict[int, set[str]] = defaultdict(set)
    needs_rank: set[int] = set()
    needs_host: set[int] = set()
    needs_job: set[int] = set()
    for g in groups:
        if g.pid is None:
            continue
        if g.job is not None:
            jobs[g.pid].add(g.job)
        else:
            needs_job.add(g.pid)
        if g.rank is not None:
            ranks[g.pid].add(g.rank)
        else:
            needs_rank.add(g.pid)
        if g.host and g.host != UNKNOWN_HOST:
            hosts[g.pid].add(g.host)
        else:
            needs_host.add(g.pid)
        if g.role and len(g.role) > len(roles.get(g.pid, "")):
            roles[g.pid] = g.role
    for pid, rank in _world_ranks(con, view).items():
        ranks[pid].add(rank)
    identity = Identity(
        rank_by_pid={pid: next(iter(r)) for pid, r in ranks.items() if len(r) == 1 and pid in needs_rank},
        host_by_pid={pid: next(iter(h)) for pid, h in hosts.items() if len(h) == 1 and pid in needs_host},
        job_by_pid={pid: next(iter(j)) for pid, j in jobs.items() if len(j) == 1 and pid in needs_job},
    )
    # A role is lent where the pid's records disagree on it (a class name beside the full actor name).
    seen_roles: dict[int, set[str | None]] = defaultdict(set)
    for g in groups:
        if g.pid is not None:
            seen_roles[g.pid].add(g.role)
    for pid, name in _names_from_errors(con, view).items():
        if len(name) > len(roles.get(pid, "")):
            roles[pid] = name
            seen_roles[pid].add(name)
    identity.role_by_pid = {pid: role for pid, role in roles.items() if len(seen_roles[pid]) > 1}
    if any(g.host == UNKNOWN_HOST or not g.host for g in groups):
        _hosts_from_raylets(con, view, identity)
    return identity


def _world_ranks(con: duckdb.DuckDBPyConnection, view: str) -> dict[int, int]:
    """pid -> Ray Train world rank, from Ray Train's JSON logs and its controller's worker-group listing
    (see the module docstring); a pid named with two ranks gets none."""
    rows = con.execute(f"""
        SELECT pid, TRY_CAST(json_extract_string(attrs, '$.world_rank') AS INTEGER) FROM {view}
        WHERE format = 'json' AND pid IS NOT NULL AND contains(attrs, '"world_rank"') GROUP BY ALL""").fetchall()
    found: dict[int, set[int]] = defaultdict(set)
    for pid, rank in rows:
        if rank is not None:
            found[int(pid)].add(int(rank))
    listed = con.execute(f"SELECT DISTINCT msg FROM {view} WHERE format = 'ray' AND contains(msg, 'world_rank=')")
    for (msg,) in listed.fetchall():
        for match in _WORKER_GROUP.finditer(msg or ""):
            found[int(match["pid"])].add(int(match["rank"]))
    return {pid: next(iter(ranks)) for pid, ranks in found.items() if len(ranks) == 1}


def worker_pids(con: duckdb.DuckDBPyConnection, view: str) -> dict[str, int]:
    """Ray worker id -> pid, from the names of the workers' files."""
    out: dict[str, int] = {}
    for (source,) in con.execute(f"SELECT DISTINCT source FROM {view} WHERE format = 'ray'").fetchall():
        found = _WORKER_FILE.search(source or "")
        if found:
            out[found["worker_id"]] = int(found["pid"])
    return out


def _names_from_errors(con: duckdb.DuckDBPyConnection, view: str) -> dict[int, str]:
    """pid -> actor name from Ray's error texts that name both (see the module docstring)."""
    rows = con.execute(
        f"SELECT msg, exc FROM {view} WHERE format = 'ray' AND level IN ('ERROR', 'CRITICAL', 'UNKNOWN') "
        "AND (contains(msg, 'ray::') OR contains(msg, 'ActorDiedError') OR contains(exc, 'ray::'))").fetchall()
    names: dict[int, str] = {}
    for msg, exc in rows:
        text = f"{msg or ''}\n{exc or ''}"
        for pattern in (_NAMED_TASK, _DIED_ACTOR):
            for found in pattern.finditer(text):
                names[int(found["pid"])] = found["name"]
    return names


def _hosts_from_raylets(con: duckdb.DuckDBPyConnection, view: str, identity: Identity) -> None:
    rows = con.execute(
        f"SELECT DISTINCT source, msg FROM {view} WHERE host = '{UNKNOWN_HOST}' AND format = 'ray' "
        "AND starts_with(msg, 'Raylet of id')").fetchall()
    by_folder: dict[str, str] = {}
    for source, msg in rows:
        found = _RAYLET_STARTED.search(msg or "")
        if found and source:
            by_folder[os.path.dirname(source)] = found["host"]
            identity.nodes[found["node"]] = (found["host"], found["ip"])
    if not by_folder:
        return
    sources = con.execute(f"SELECT DISTINCT source FROM {view} WHERE host = '{UNKNOWN_HOST}'").fetchall()
    for (source,) in sources:
        folder = os.path.dirname(source or "")
        host = by_folder.get(folder) or next((h for f, h in by_folder.items() if folder.startswith(f + os.sep)), None)
        if host is not None:
            identity.host_by_source[source] = host


def joined_view_sql(base: str) -> str:
    """SELECT over `base` with the identity tables (``identity_pid``, ``identity_source``) lent to
    the records that lack rank, role or host (see the module docstring)."""
    return f"""
        SELECT r.* REPLACE (
            coalesce(r.rank, p.rank) AS rank,
            CASE WHEN p.role IS NOT NULL AND (r.role IS NULL OR length(p.role) > length(r.role))
                 THEN p.role ELSE r.role END AS role,
            CASE WHEN r.host IS NULL OR r.host = '{UNKNOWN_HOST}'
                 THEN coalesce(s.host, p.host, r.host) ELSE r.host END AS host,
            coalesce(r.job, p.job) AS job)
        FROM {base} r
        LEFT JOIN identity_pid p ON r.pid = p.pid
        LEFT JOIN identity_source s ON r.source = s.source
    """


def register(con: duckdb.DuckDBPyConnection, identity: Identity) -> None:
    """The identity maps as the tables :func:`joined_view_sql` joins."""
    import pyarrow as pa

    pids = sorted(set(identity.rank_by_pid) | set(identity.role_by_pid) | set(identity.host_by_pid)
                  | set(identity.job_by_pid))
    con.register("identity_pid", pa.table({
        "pid": pa.array(pids, pa.int32()),
        "rank": pa.array([identity.rank_by_pid.get(p) for p in pids], pa.int32()),
        "role": pa.array([identity.role_by_pid.get(p) for p in pids], pa.string()),
        "host": pa.array([identity.host_by_pid.get(p) for p in pids], pa.string()),
        "job": pa.array([identity.job_by_pid.get(p) for p in pids], pa.string()),
    }))
    sources = sorted(identity.host_by_source)
    con.register("identity_source", pa.table({
        "source": pa.array(sources, pa.string()),
        "host": pa.array([identity.host_by_source[s] for s in sources], pa.string()),
    }))
