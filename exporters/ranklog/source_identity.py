"""Who wrote a record — rank, local rank, role, pid, node — joined across everything the logs say.

One process writes to several files and streams, and most of its lines do not say which rank it
is: a torchrun ``attempt_0/1/stderr.log`` names only the local rank (its path), a Ray worker's
``.out`` file and its ``python-core-worker-…_<pid>.log`` only the pid, a worker's first lines come
before the ``[Rank 1]`` line that names it. The parse stage (:mod:`ranklog.parse.identity_stage`)
gives a source's records what the source itself says; these rules lend the rest across sources.
Both read paths apply them the same way: a raw log folder (:mod:`ranklog.parse.directory`), an
archive (:mod:`ranklog.query.identity_join`: the map the archive writes beside its data), triage
(:mod:`ranklog.triage.gather`), and the agent for its own node's files (its metrics' labels).

Input: *observations*, the distinct identity keys of the records (:data:`KEY`) with the source's
path, format and job and the time span of the key's records (:func:`observe` makes them from
records; the archive keeps them as it ingests). Output: for every key that gains something, the
values to put on its records (:class:`Lent`; :func:`fill` and :func:`fill_sql` apply them).

The rules, in order (a rule lends only what a record lacks, and only an unambiguous value):

1. **Folder → node.** Every file of a Ray session's ``logs/`` folder was written on one node; a
   source without a host in that folder or below it (Ray Train's ``logs/train/`` JSON logs) takes
   the one host the folder's ``ray`` sources name (the raylet's own "… hostname: X" line names it:
   :func:`raylet_host`).
2. **One process per source.** A source whose every record names the same pid, or the same local
   rank — the layout says one process wrote it: torchrun's per-rank files, Ray's worker and
   core-worker files, ranklog's ``rank-N.pid-P`` files, a text layout printing the pid on every
   line — is one process: the rank, local rank, pid and host any of its records name (one value
   each) and its fullest role belong to all of its records. The files of one torchrun process
   folder (``attempt_<n>/<local rank>/``: stdout, stderr, error.json) are one process together.
3. **One process per pid.** Records (any source) naming the same pid on the same host whose spans
   are less than :data:`SAME_PROCESS_GAP_NS` apart are one process: the rank they name (if exactly
   one) goes to those that name none — Ray's core-worker log, a worker's ``.out`` file, the
   driver's ``(Trainer pid=…)`` lines. A pid seen with two ranks (a Ray task worker reused across
   ranks, a pid reused in one hour) lends nothing: a guess would put a failure on the wrong rank.
   A record with no host (a copied driver console) joins the pid's process on the one host that has it.
4. **Launcher pairs.** A record that pairs a local rank with a global rank on a host (torch
   elastic's rendezvous result ``local_ranks=[0, 1]`` / ``global_ranks=[2, 3]``, a ``[rank3]:``
   line in local rank 1's file) lends the global rank to the records of that local rank on that
   host and job (jobs differing only where both name one), within the same span rule.
5. **One node.** A job (with its local ranks) whose records within the span rule all come from one
   host, none pairing a local rank with a different global rank: global rank = local rank (a
   single-node torchrun run).

Roles: the fullest name of the process wins over a name it contains (case ignored): Ray's
``:actor_name:WorkerDict`` marker and forwarded ``(WorkerDict pid=…)`` lines become
``kZ3xWqWorkerDict_0:1``, ``Trainer`` becomes ``trainer_1``; a different name is never replaced.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .archive_layout import IDENTITY_DIR, IDENTITY_SUFFIX

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.fs as pafs

UNKNOWN_HOST = "unknown"
# An agent's identity notices ride in the schema metadata of an Arrow ingest body under this key: JSON
# ``[{observation}, …]`` (:func:`notices_json`), what it learned of files whose records it already shipped.
NOTICES_METADATA_KEY = b"ranklog.identity"
MAX_NOTICES = 10_000
KEY = ("source_id", "host", "pid", "local_rank", "rank", "role")  # what a record says of itself
LENT = ("rank", "local_rank", "role", "pid", "host")  # what the rules may give it
OBSERVED = (*KEY, "source", "format", "job")  # an observation: a key, its source's names, its span
SPAN = ("first_ns", "last_ns", "records")
# Two runs of records with the same pid on one host further apart than this are two processes.
SAME_PROCESS_GAP_NS = 3600 * 1_000_000_000
_INT_KEYS = frozenset({"pid", "local_rank", "rank"})
_MTIME_MARK = '"ts_inferred":"mtime"'  # ranklog.parse.inferred_time's marks
_READ_MARK = '"ts_inferred":"read"'
_SEPARATOR = "\x1f"
_NULL = "\x00"

_RAYLET_STARTED = re.compile(
    r"Raylet of id, (?P<node>[0-9a-f]+) started\..*?node_manager address: \[?(?P<ip>[0-9A-Fa-f.:]+?)\]?:\d+"
    r".*?hostname: (?P<host>\S+)")


def raylet_host(text: str) -> tuple[str, str, str] | None:
    """(host, ip, Ray node id) from the raylet's "Raylet of id, <node> started. … hostname: <host>"."""
    found = _RAYLET_STARTED.search(text)
    return None if found is None else (found["host"], found["ip"], found["node"])


@dataclass(frozen=True)
class Group:
    """One observation: records of one source sharing one identity key, and their span."""

    source_id: str
    host: str | None = None
    pid: int | None = None
    local_rank: int | None = None
    rank: int | None = None
    role: str | None = None
    source: str | None = None
    format: str | None = None
    job: str | None = None
    first_ns: int | None = None  # None: no record of the key says when it was written
    last_ns: int | None = None
    records: int = 0

    @property
    def key(self) -> tuple:
        return (self.source_id, self.host, self.pid, self.local_rank, self.rank, self.role)


@dataclass(frozen=True)
class Lent:
    """The values a key's records take (None: the record keeps its own)."""

    rank: int | None = None
    local_rank: int | None = None
    role: str | None = None
    pid: int | None = None
    host: str | None = None


def known_host(host: str | None) -> bool:
    return bool(host) and host != UNKNOWN_HOST


# -- observations -------------------------------------------------------------------------------------
def observation_schema() -> pa.Schema:
    import pyarrow as pa

    kinds = {"pid": pa.int32(), "local_rank": pa.int32(), "rank": pa.int32()}
    return pa.schema([pa.field(name, kinds.get(name, pa.string())) for name in OBSERVED]
                     + [pa.field(name, pa.int64()) for name in SPAN])


def observe(table: pa.Table | pa.RecordBatch) -> pa.Table:
    """The observations of some records: one row per distinct :data:`OBSERVED` values, with the
    first and last ``ts`` (ns) and the number of records."""
    import pyarrow as pa
    import pyarrow.compute as pc

    schema = observation_schema()
    if not table.num_rows:
        return schema.empty_table()
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    columns = {}
    for name in OBSERVED:
        column = table.column(name)
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        columns[name] = column.cast(schema.field(name).type)
    # a time taken from the file's mtime or the reading clock says nothing of when the line was
    # written (a copied folder): such records give their key no span
    ns = pc.cast(table.column("ts"), pa.int64())  # in the column's unit: scaled below
    if "attrs" in table.column_names and table.column("attrs").null_count < table.num_rows:
        attrs = table.column("attrs")
        unsure = pc.or_(pc.match_substring(attrs, _MTIME_MARK), pc.match_substring(attrs, _READ_MARK))
        ns = pc.if_else(pc.fill_null(unsure, False), pa.scalar(None, pa.int64()), ns)
    columns["ns"] = ns
    unit = table.schema.field("ts").type.unit
    grouped = pa.table(columns).group_by(list(OBSERVED), use_threads=False).aggregate(
        [("ns", "min"), ("ns", "max"), ("ns", "count", pc.CountOptions(mode="all"))])
    scale = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}[unit]
    out = {name: grouped.column(name) for name in OBSERVED}
    out["first_ns"] = pc.multiply(grouped.column("ns_min"), scale)
    out["last_ns"] = pc.multiply(grouped.column("ns_max"), scale)
    out["records"] = grouped.column("ns_count")
    return pa.table(out, schema=schema)


def merge_observations(tables: Sequence[pa.Table]) -> pa.Table:
    """Observations of several record sets as one (spans widened, counts added)."""
    import pyarrow as pa

    schema = observation_schema()
    tables = [t.select(list(schema.names)).cast(schema) for t in tables if t.num_rows]
    if not tables:
        return schema.empty_table()
    grouped = pa.concat_tables(tables).group_by(list(OBSERVED), use_threads=False).aggregate(
        [("first_ns", "min"), ("last_ns", "max"), ("records", "sum")])
    return pa.table({**{name: grouped.column(name) for name in OBSERVED}, "first_ns": grouped.column("first_ns_min"),
                     "last_ns": grouped.column("last_ns_max"), "records": grouped.column("records_sum")}, schema=schema)


def map_files(fs: pafs.FileSystem, base: str) -> list[pafs.FileInfo]:
    """The map files every archive wrote under the archive root `base` (:mod:`ranklog.archive.identity_map`)."""
    import pyarrow.fs as pafs

    selector = pafs.FileSelector(f"{base.rstrip('/')}/{IDENTITY_DIR}", allow_not_found=True)
    return sorted((info for info in fs.get_file_info(selector)
                   if info.type == pafs.FileType.File and info.base_name.endswith(IDENTITY_SUFFIX)
                   and not info.base_name.startswith(".")), key=lambda info: info.path)


def read_map_file(fs: pafs.FileSystem, path: str) -> pa.Table:
    import pyarrow.parquet as pq

    with fs.open_input_file(path) as handle:
        return pq.read_table(handle).cast(observation_schema())


def read_map(fs: pafs.FileSystem, files: Sequence[pafs.FileInfo]) -> pa.Table | None:
    """The observations of `files` merged; None when one vanished (merged away while listed: list again)."""
    tables = []
    for info in files:
        try:
            tables.append(read_map_file(fs, info.path))
        except FileNotFoundError:
            return None
    return merge_observations(tables)


def notices_json(groups: Sequence[Group]) -> bytes:
    """Observations as an agent's identity notice (:data:`NOTICES_METADATA_KEY`)."""
    import json

    names = (*OBSERVED, *SPAN)
    return json.dumps([{name: getattr(g, name) for name in names} for g in groups], separators=(",", ":")).encode()


def parse_notices(raw: bytes) -> list[Group]:
    """An identity notice's observations; ValueError naming what is wrong with a malformed one."""
    import json

    try:
        items = json.loads(raw)
    except ValueError:
        raise ValueError("identity notice: not JSON") from None
    if not isinstance(items, list) or len(items) > MAX_NOTICES:
        raise ValueError(f"identity notice: expected a list of at most {MAX_NOTICES} observations")
    kinds = {name: int if name in _INT_KEYS or name in SPAN else str for name in (*OBSERVED, *SPAN)}
    bits = {name: 31 if name in _INT_KEYS else 63 for name in kinds}
    out = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("source_id"), str) or set(item) - set(kinds):
            raise ValueError("identity notice: each observation is an object with a source_id and known keys only")
        for name, value in item.items():
            if value is not None and (type(value) is not kinds[name]
                                      or (kinds[name] is int and not -(2 ** bits[name]) <= value < 2 ** bits[name])):
                raise ValueError(f"identity notice: {name} must be {kinds[name].__name__} or null")
        out.append(Group(**item))
    return out


def observations_table(groups: Sequence[Group]) -> pa.Table:
    """Observations as the map's table (:func:`observation_schema`)."""
    import pyarrow as pa

    schema = observation_schema()
    return pa.Table.from_pylist([{name: getattr(g, name) for name in schema.names} for g in groups], schema=schema)


def groups_of(table: pa.Table) -> list[Group]:
    """Observation rows as :class:`Group` values."""
    names = [name for name in (*OBSERVED, *SPAN) if name in table.column_names]
    return [Group(**row) for row in table.select(names).to_pylist()]


# -- the rules -----------------------------------------------------------------------------------------
@dataclass
class _Unit:
    """What is known of one process as one source (or one group of a shared source) shows it."""

    host: str | None
    pid: int | None
    local_rank: int | None
    rank: int | None
    role: str | None
    job: str | None
    first_ns: int | None
    last_ns: int | None
    ranks: frozenset[int]  # every rank its records name (two: the unit lends no rank)
    void_ranks: frozenset[int] = frozenset()  # printed ranks that name no process (_void_contradicted_ranks)


def _one(values: Iterable[Any]) -> Any:
    """The one non-null value, or None (none, or several)."""
    found = {v for v in values if v is not None}
    return next(iter(found)) if len(found) == 1 else None


def role_family(names: Iterable[str | None]) -> str | None:
    """The fullest of `names` when it contains every other one (case ignored): ``WorkerDict`` and
    ``kZ3xWqWorkerDict_0:1`` name one actor; ``tokenize_shard`` and ``fetch_batch`` (a Ray worker
    that ran two tasks) name no single role, so None."""
    found = sorted({n for n in names if n}, key=lambda n: (-len(n), n))
    if not found or any(n.lower() not in found[0].lower() for n in found[1:]):
        return None
    return found[0]


def one_process(groups: Sequence[Group]) -> bool:
    """A source is one process when all its records name the same pid, or the same local rank."""
    return any(len({getattr(g, name) for g in groups}) == 1 and getattr(groups[0], name) is not None
               for name in ("pid", "local_rank"))


def _near(a: _Unit | Group, first: int | None, last: int | None) -> bool:
    """Spans less than the gap apart (a missing span is near everything)."""
    if first is None or last is None or a.first_ns is None or a.last_ns is None:
        return True
    return a.first_ns - SAME_PROCESS_GAP_NS <= last and first - SAME_PROCESS_GAP_NS <= a.last_ns


def _span(firsts: Iterable[int | None], lasts: Iterable[int | None]) -> tuple[int | None, int | None]:
    known_first = [f for f in firsts if f is not None]
    known_last = [t for t in lasts if t is not None]
    return (min(known_first) if known_first else None, max(known_last) if known_last else None)


def _folder_hosts(groups: Iterable[Group]) -> dict[str, str]:
    """Ray session folder → the one host its ``ray`` sources name (rule 1)."""
    hosts: dict[str, set[str]] = defaultdict(set)
    for g in groups:
        if g.format == "ray" and g.source and known_host(g.host):
            hosts[os.path.dirname(g.source)].add(g.host)
    return {folder: next(iter(found)) for folder, found in hosts.items() if len(found) == 1}


def _session_host(source: str, folder_host: dict[str, str]) -> str | None:
    """The host of the Ray session folder `source` lies in, or below (Ray Train's ``logs/train/``)."""
    folder = os.path.dirname(source)
    while folder:
        if folder in folder_host:
            return folder_host[folder]
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent
    return None


def _units(by_source: dict[str, list[Group]], folder_host: dict[str, str]
           ) -> tuple[dict[str, _Unit], list[_Unit], dict[str, str | None]]:
    """(one-process sources → their unit, every unit: those and each group of the other sources,
    each source's host: the one its records name, else its Ray folder's)."""
    whole: dict[str, _Unit] = {}
    units: list[_Unit] = []
    single: list[_Unit] = []  # the one-process sources' own units (a process folder's are joined too)
    hosts: dict[str, str | None] = {}
    for source_id, groups in by_source.items():
        host = _one(g.host for g in groups if known_host(g.host))
        if host is None and groups[0].source and folder_host:
            host = _session_host(groups[0].source, folder_host)
        hosts[source_id] = host
        if one_process(groups):
            ranks = frozenset(g.rank for g in groups if g.rank is not None)
            unit = _Unit(host, _one(g.pid for g in groups), _one(g.local_rank for g in groups), _one(ranks),
                         role_family(g.role for g in groups), _one(g.job for g in groups),
                         *_span((g.first_ns for g in groups), (g.last_ns for g in groups)), ranks)
            whole[source_id] = unit
            units.append(unit)
            single.append(unit)
            continue
        for g in groups:
            own_host = g.host if known_host(g.host) else host
            units.append(_Unit(own_host, g.pid, g.local_rank, g.rank, g.role, g.job, g.first_ns, g.last_ns,
                               frozenset() if g.rank is None else frozenset({g.rank})))
    for members in _process_folders(by_source, whole).values():
        joined = _merged([whole[source_id] for source_id in members])
        units.append(joined)
        whole.update(dict.fromkeys(members, joined))
    processes = [*{id(u): u for u in whole.values()}.values(), *single]
    return _void_contradicted_ranks(whole, units, processes), units, hosts


def _void_contradicted_ranks(whole: dict[str, _Unit], units: list[_Unit], processes: list[_Unit]
                             ) -> dict[str, _Unit]:
    """A printed rank that launcher local ranks of one host claim at once (every rank's file saying
    ``[RANK 0]``: a logger set up before the process group knew its rank) names no process: it is
    dropped from those one-process units (in `units` too, in place), so the rank their other lines
    print, the launcher's pairing or the one-node rule gives them the real one, which replaces the
    printed one on their records."""
    claims: dict[tuple, set[int]] = defaultdict(set)
    for u in processes:
        if u.local_rank is not None:
            for rank in u.ranks:
                claims[(u.host, u.job, rank)].add(u.local_rank)
    void = {key for key, local_ranks in claims.items() if len(local_ranks) > 1}
    if not void:
        return whole
    fixed = {}
    for u in processes:
        dropped = frozenset(r for r in u.ranks if (u.host, u.job, r) in void) if u.local_rank is not None else ()
        if dropped:
            kept = u.ranks - dropped
            fixed[id(u)] = replace(u, rank=_one(kept), ranks=kept, void_ranks=dropped)
    units[:] = [fixed.get(id(u), u) for u in units]
    return {source_id: fixed.get(id(u), u) for source_id, u in whole.items()}


def _process_folders(by_source: dict[str, list[Group]], whole: dict[str, _Unit]) -> dict[tuple, list[str]]:
    """torchrun's per-process folders (``attempt_<n>/<local rank>/``: stdout, stderr, error.json) of
    more than one file: one process wrote them all."""
    folders: dict[tuple, list[str]] = defaultdict(list)
    for source_id, unit in whole.items():
        first = by_source[source_id][0]
        if (first.format or "").startswith("torchrun") and first.source and unit.local_rank is not None:
            folders[(unit.host, os.path.dirname(first.source), unit.local_rank)].append(source_id)
    return {key: members for key, members in folders.items() if len(members) > 1}


def _merged(units: list[_Unit]) -> _Unit:
    ranks = frozenset().union(*(u.ranks for u in units))
    return _Unit(units[0].host, _one(u.pid for u in units), units[0].local_rank, _one(ranks),
                 role_family(u.role for u in units), _one(u.job for u in units),
                 *_span((u.first_ns for u in units), (u.last_ns for u in units)), ranks)


class _Index:
    """Units by (host, pid) and by (host, local rank), for rules 3–5."""

    def __init__(self, units: list[_Unit]) -> None:
        self.by_pid: dict[int, list[_Unit]] = defaultdict(list)
        self.by_local: dict[tuple[str | None, int], list[_Unit]] = defaultdict(list)
        self.by_job: dict[str | None, list[_Unit]] = defaultdict(list)
        self._whole_job: dict[str | None, bool] = {}
        for unit in units:
            if unit.pid is not None:
                self.by_pid[unit.pid].append(unit)
            if unit.local_rank is not None:
                self.by_local[(unit.host, unit.local_rank)].append(unit)
                self.by_job[unit.job].append(unit)

    def process(self, host: str | None, pid: int, first: int | None, last: int | None) -> list[_Unit]:
        """The units of the process with `pid` on `host` (any one host for a unit without one) that
        lived around [first, last]: a chain of units less than the gap apart."""
        candidates = [u for u in self.by_pid.get(pid, ()) if host is None or u.host == host or u.host is None]
        if host is None:
            hosts = {u.host for u in candidates if u.host is not None and _near(u, first, last)}
            if len(hosts) > 1:
                return []
        return _chain(candidates, first, last)

    def pairs(self, host: str | None, local_rank: int, job: str | None, first: int | None,
              last: int | None) -> set[int]:
        """Global ranks paired with `local_rank` on `host` around [first, last] (rule 4)."""
        return {u.rank for u in self.by_local.get((host, local_rank), ())
                if u.rank is not None and (job is None or u.job is None or u.job == job) and _near(u, first, last)}

    def single_node(self, job: str | None, first: int | None, last: int | None) -> bool:
        """Rule 5: the job's units with a local rank around [first, last] are on one host, and none
        pairs a local rank with a different global rank."""
        if job not in self._whole_job:  # the whole job at once first: its answer holds for any part of it
            self._whole_job[job] = _one_node(self.by_job.get(job, []))
        if self._whole_job[job]:
            return True
        return _one_node([u for u in self.by_job.get(job, ()) if _near(u, first, last)])


def _one_node(units: list[_Unit]) -> bool:
    return len({u.host for u in units}) == 1 and all(u.rank is None or u.rank == u.local_rank for u in units)


def _chain(units: list[_Unit], first: int | None, last: int | None) -> list[_Unit]:
    """The units linked to [first, last] through spans less than the gap apart (units and a range
    without a span are linked to everything)."""
    chain: list[_Unit] = []
    low, high = first, last
    for unit in sorted(units, key=lambda u: (u.first_ns is not None, u.first_ns or 0)):
        if _near(unit, low, high):
            chain.append(unit)
            if unit.first_ns is not None and unit.last_ns is not None:
                low, high = _span((low, unit.first_ns), (high, unit.last_ns))
    return chain


def resolve(observations: Iterable[Group], evidence: Iterable[Group] = (), *, single_node: bool = True
            ) -> dict[tuple, Lent]:
    """For every observed key that gains a value, what its records take (see the module docstring).

    `evidence` are observations that inform the rules without being records to fill (a Ray error
    naming an actor beside its pid; a raylet's hostname read from its message). `single_node` False
    leaves rule 5 out: an agent sees one node's files only, so one host proves nothing there."""
    observations = list(observations)
    evidence = list(evidence)
    if not evidence and not _may_lend(observations):
        return {}
    by_source: dict[str, list[Group]] = defaultdict(list)
    for g in observations:
        by_source[g.source_id].append(g)
    folder_host = _folder_hosts([*observations, *evidence])
    whole, units, hosts = _units(by_source, folder_host)
    extra = [_Unit(g.host if known_host(g.host) else None, g.pid, g.local_rank, g.rank, g.role, g.job, g.first_ns,
                   g.last_ns, frozenset() if g.rank is None else frozenset({g.rank})) for g in evidence]
    index = _Index(units + extra)
    out: dict[tuple, Lent] = {}
    for source_id, groups in by_source.items():
        unit = whole.get(source_id)
        for g in groups:
            lent = _lend(g, unit, hosts[source_id], index, single_node)
            if lent != Lent():
                out[g.key] = lent
    return out


def _may_lend(groups: list[Group]) -> bool:
    """Whether any rule can give any key something (one pass; most archives of ranklog's own JSON
    name every record's rank, pid and host, and the rules need not run over them)."""
    seen: dict[str, set] = {name: set() for name in (*LENT, "missing")}
    for g in groups:
        for name in ("rank", "local_rank", "pid", "role"):
            value = getattr(g, name)
            seen[name if value is not None else "missing"].add(name if value is None else value)
        seen["host" if known_host(g.host) else "missing"].add(g.host if known_host(g.host) else "host")
    missing = seen["missing"]
    return (("rank" in missing and bool(seen["rank"] or seen["local_rank"]))
            or any(name in missing and seen[name] for name in ("local_rank", "pid", "host"))
            or len(seen["role"]) > 1 or ("role" in missing and bool(seen["role"])))


def _lend(g: Group, unit: _Unit | None, source_host: str | None, index: _Index, single_node: bool) -> Lent:
    """What group `g` (of a one-process source when `unit` is given) gains."""
    base = unit or _Unit(g.host if known_host(g.host) else source_host, g.pid, g.local_rank, g.rank, g.role, g.job,
                         g.first_ns, g.last_ns, frozenset())
    host = g.host if known_host(g.host) else base.host
    pid = g.pid if g.pid is not None else base.pid
    local_rank = g.local_rank if g.local_rank is not None else base.local_rank
    void = unit is not None and g.rank in unit.void_ranks
    rank = None if void else g.rank
    if rank is None and unit is not None and len(unit.ranks) <= 1:
        rank = unit.rank
    roles = [g.role, base.role]
    first, last = base.first_ns, base.last_ns
    if pid is not None:
        process = index.process(host, pid, first, last)
        ranks = set().union(*(u.ranks for u in process)) if process else set()
        if rank is None and len(ranks) == 1 and (unit is None or not unit.ranks):
            rank = next(iter(ranks))
        roles += [u.role for u in process]
        if local_rank is None:
            local_rank = _one(u.local_rank for u in process)
        if host is None:
            host = _one(u.host for u in process)
    if rank is None and local_rank is not None and (unit is None or not unit.ranks):
        paired = index.pairs(host, local_rank, base.job, first, last)
        if len(paired) == 1:
            rank = next(iter(paired))
        elif not paired and single_node and index.single_node(base.job, first, last):
            rank = local_rank
    role = role_family(roles)
    return Lent(rank=rank if g.rank is None or (void and rank != g.rank) else None,
                local_rank=local_rank if g.local_rank is None else None,
                role=role if role != g.role else None,
                pid=pid if g.pid is None else None,
                host=host if not known_host(g.host) and host is not None else None)


# -- applying what was lent ---------------------------------------------------------------------------
@dataclass(frozen=True)
class LentTable:
    """What :func:`resolve` lends, as Arrow: the keys (composite text, :func:`key_text`), the values
    (``lent_<field>`` columns, null = keep), and the sources concerned."""

    table: pa.Table  # KEY columns, "key", and lent_<name> for each of LENT
    sources: pa.Array  # distinct source ids with something lent

    @property
    def empty(self) -> bool:
        return self.table.num_rows == 0

    def lends(self, name: str) -> bool:
        """Whether some key gains a value of `name` (one of :data:`LENT`)."""
        return self.table.column(f"lent_{name}").null_count < self.table.num_rows

    def sources_where(self, expression: Any) -> list[str]:
        """Source ids of the lent keys whose records, once filled, satisfy `expression` (a dataset
        expression over record columns): what a filtered scan must read besides its own matches."""
        import pyarrow.dataset as ds

        filled = self.table.select(["source_id"])
        for name in ("rank", "local_rank", "role", "pid", "host"):
            filled = filled.append_column(name, _coalesced(self.table, name))
        kept = ds.dataset(filled).to_table(filter=expression, columns=["source_id"])
        return sorted(set(kept.column("source_id").to_pylist()))


def _coalesced(table: pa.Table, name: str) -> pa.ChunkedArray:
    import pyarrow.compute as pc

    return pc.coalesce(table.column(f"lent_{name}"), table.column(name))


def lent_table(lent: dict[tuple, Lent]) -> LentTable:
    """:func:`resolve`'s answer as a :class:`LentTable`."""
    import pyarrow as pa

    kinds = {"pid": pa.int32(), "local_rank": pa.int32(), "rank": pa.int32()}
    keys = list(lent)
    columns: dict[str, pa.Array] = {name: pa.array([k[i] for k in keys], kinds.get(name, pa.string()))
                                    for i, name in enumerate(KEY)}
    columns["key"] = key_text({name: columns[name] for name in KEY})
    for name in LENT:
        columns[f"lent_{name}"] = pa.array([getattr(lent[k], name) for k in keys], kinds.get(name, pa.string()))
    table = pa.table(columns)
    return LentTable(table, pa.array(sorted({k[0] for k in keys}), pa.string()))


def lend(observations: pa.Table) -> LentTable:
    """What the rules lend, given every observation (:func:`observe`, :func:`merge_observations`)."""
    return lent_table(resolve(groups_of(observations)))


def key_text(columns: dict[str, Any]) -> pa.Array:
    """The :data:`KEY` of each row as one string (null parts spelled apart from empty ones)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = []
    for name in KEY:
        column = columns[name]
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        if not pa.types.is_string(column.type):
            column = column.cast(pa.string())
        parts.append(column)
    return pc.binary_join_element_wise(*parts, _SEPARATOR, null_handling="replace", null_replacement=_NULL)


def fill(batch: pa.RecordBatch | pa.Table, lent: LentTable) -> pa.RecordBatch | pa.Table:
    """`batch` with the lent values on the records whose key has some (columns it lacks stay out:
    a record's key needs every :data:`KEY` column, so a batch without them is returned as is). Only
    the records of sources with something lent are looked at."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if lent.empty or not batch.num_rows or any(name not in batch.schema.names for name in KEY):
        return batch
    concerned = pc.fill_null(pc.is_in(batch.column("source_id"), value_set=lent.sources), False)
    count = pc.sum(concerned).as_py() or 0
    if not count:
        return batch
    whole = count == batch.num_rows
    part = batch if whole else batch.filter(concerned)
    at = pc.index_in(key_text({name: part.column(name) for name in KEY}), value_set=lent.table.column("key"))
    if at.null_count == len(at):
        return batch
    columns = {}
    for name in LENT:
        own = _plain(batch.column(name))
        mine = own if whole else _plain(part.column(name))
        value = _array(pc.coalesce(lent.table.column(f"lent_{name}").take(at).cast(own.type), mine))
        columns[name] = value if whole else pc.replace_with_mask(own, _array(concerned), value)
    arrays = [columns.get(name, batch.column(name)) for name in batch.schema.names]
    fields = [batch.schema.field(name).with_type(columns[name].type) if name in columns else batch.schema.field(name)
              for name in batch.schema.names]
    schema = pa.schema(fields, metadata=batch.schema.metadata)
    if isinstance(batch, pa.RecordBatch):
        return pa.RecordBatch.from_arrays([_array(a) for a in arrays], schema=schema)
    return pa.Table.from_arrays(arrays, schema=schema)


def _plain(column: Any) -> Any:
    """A column as one array of its value type (dictionaries decoded)."""
    import pyarrow as pa

    column = _array(column)
    return column.cast(column.type.value_type) if pa.types.is_dictionary(column.type) else column


def _array(column: Any) -> Any:
    import pyarrow as pa

    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def fill_sql(base: str, lent_view: str) -> str:
    """The same fill as :func:`fill` in DuckDB: SELECT over `base` joined with the registered lent
    table `lent_view` (a :attr:`LentTable.table`)."""
    on = " AND ".join(f"r.{_q(name)} IS NOT DISTINCT FROM l.{_q(name)}" for name in KEY)
    replaced = ", ".join(f"coalesce(l.lent_{name}, r.{_q(name)}) AS {_q(name)}" for name in LENT)
    return f"SELECT r.* REPLACE ({replaced}) FROM {base} r LEFT JOIN {lent_view} l ON {on}"


def _q(name: str) -> str:
    return f'"{name}"'
