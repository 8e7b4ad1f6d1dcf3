"""The identity join on an archive's read side: records get the rank, role, pid and node their writer
was found to have, also when that was learned after they were stored.

The archive keeps a source → identity map beside its data (:mod:`ranklog.archive.identity_map`); a
query resolves it with the shared rules (:mod:`ranklog.source_identity`) into the values each
record key gains, and every batch the engine reads passes through :func:`ranklog.source_identity.fill`
before it is filtered on those columns and returned. So ``ranklog query --rank 1``, Loki's
``{rank="1"}``, ``/v1/query`` and the label APIs see a Ray worker's first lines, its ``.out`` file
and its core-worker log as rank 1's, like a raw folder read with ``--log_dir``.

Filters on the columns the join fills (host, pid, rank, and label matchers on rank, local_rank,
role, host) cannot be answered from the stored values alone: the scan lets the records of the
sources whose lent values satisfy them through as well (:class:`JoinedSpec`: one ``source_id``
set lookup, computed from the map, not the records), fills, then applies those filters. Everything
else — partition pruning, row-group statistics, the text, trace and severe-rows indexes — works as
before. An archive without a map (written before this version) is read as it is stored.

The resolved map is cached per archive root, keyed by the listing of its map files (names and
sizes), so a Grafana dashboard's many queries resolve it once until an archive writes a new file.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..source_identity import KEY, LENT, LentTable, fill, lend, map_files, read_map
from .filter_arrow import build_expression, identity_expression
from .filters import QuerySpec

if TYPE_CHECKING:
    import pyarrow as pa

    from .sources import ArchiveSource

_CACHE: dict[tuple[str, str], tuple[tuple, LentTable]] = {}
_LOCK = threading.Lock()
READ_ATTEMPTS = 3


def archive_lent(source: ArchiveSource) -> LentTable | None:
    """What the archive's map lends (None: no map, or nothing to lend)."""
    key = (source.label, source.root)
    for _ in range(READ_ATTEMPTS):
        files = map_files(source.filesystem, source.root)
        if not files:
            return None
        listing = tuple((info.path, info.size) for info in files)
        with _LOCK:
            cached = _CACHE.get(key)
        if cached is not None and cached[0] == listing:
            return None if cached[1].empty else cached[1]
        observations = read_map(source.filesystem, files)
        if observations is not None:
            break
    else:
        return None
    lent = lend(observations)
    with _LOCK:
        _CACHE[key] = (listing, lent)
    return None if lent.empty else lent


@dataclass(frozen=True)
class JoinedSpec(QuerySpec):
    """A spec whose identity filters also let `identity_sources`' records through (the join decides)."""

    identity_sources: tuple[str, ...] = ()

    def expression(self) -> Any:
        return build_expression(self, self.identity_sources)

    def filter_columns(self) -> list[str]:
        used = super().filter_columns()
        return [*used, "source_id"] if self.identity_sources and "source_id" not in used else used


@dataclass(frozen=True)
class Join:
    """How one scan of an archive joins: the spec it runs, the columns it reads, the filter after."""

    lent: LentTable
    spec: QuerySpec
    after: Any  # the identity filters (a dataset expression) or None

    def columns(self, selected: list[str]) -> list[str]:
        """`selected` plus what filling and the filters after it read."""
        extra = [*KEY, *self.spec.filter_columns()] if self.after is not None else list(KEY)
        return list(dict.fromkeys([*selected, *extra]))

    def batches(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """The scan's batches filled, and filtered on the identity columns."""
        for batch in batches:
            batch = fill(batch, self.lent)
            if self.after is not None and batch.num_rows:
                batch = batch.filter(self.after)
            if batch.num_rows:
                yield batch


def _filters_lent(spec: QuerySpec, lent: LentTable) -> bool:
    """Whether `spec` filters on a column the join gives some record a value of."""
    used = {"host": spec.hosts, "pid": spec.pids, "rank": spec.ranks}
    named = {name for name, _, _ in spec.label_matchers}
    return any(lent.lends(name) and (used.get(name) or name in named) for name in LENT)


def plan(source: ArchiveSource, spec: QuerySpec) -> Join | None:
    """The join for a scan of `source` with `spec`, or None when the archive lends nothing."""
    lent = archive_lent(source)
    if lent is None:
        return None
    after = identity_expression(spec) if _filters_lent(spec, lent) else None
    if after is None:
        return Join(lent, spec, None)
    sources = tuple(lent.sources_where(after))
    scan_spec = JoinedSpec(**{f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)},
                           identity_sources=sources)
    return Join(lent, scan_spec, after)


def changes_counts(source: ArchiveSource, spec: QuerySpec) -> bool:
    """Whether the join can change how many records match (a filter on a column it fills)."""
    if identity_expression(spec) is None:
        return False
    lent = archive_lent(source)
    return lent is not None and _filters_lent(spec, lent)
