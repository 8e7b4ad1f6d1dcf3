"""``ranklog query -n N`` (the last N records, in time order) and ``-f/--follow`` (then every new
record as it arrives), from an archive root, a raw log directory or a running archive.

What "new" means for each source:

- an archive root (a directory or object storage): a Parquet file that appeared since the last look.
  The archive writes one file per flush and never changes a file, so a new file holds new records —
  except a compaction output, which holds rows already there: it carries a footer mark
  (:data:`~ranklog.archive_layout.COMPACTED_KEY`) and is skipped. Only the hour partitions of the
  last :data:`LATE_S` seconds are listed at each look: a record stamped more than that before it
  reached the archive (an agent catching up after an outage) is in the archive, where a query finds
  it, but not in the follow.
- a raw log directory: the bytes its files gained (:mod:`ranklog.parse.follow_dir`).

Either way the records carry their writer's identity as a query would show it: an archive's records
pass through its identity map's join, a directory's through the rules over what was followed.
- a running archive (``--archive https://…``): its ``/v1/tail`` runs this module next to the data
  and streams the batches (:meth:`ranklog.query.remote.RemoteSource.follow`).

Records are shown as they arrive, each look's records in time order. A record seen twice (a batch
two archives stored after an agent failed over) is shown once: the last :data:`RECENT_KEYS`
``(source_id, offset)`` keys are remembered.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..archive_layout import COMPACTED_KEY
from . import engine
from .filters import QuerySpec

if TYPE_CHECKING:
    import pyarrow as pa

    from .sources import ArchiveSource, DataFile

LATE_S = 3600
RECENT_KEYS = 200_000
KEY = ("source_id", "offset")
DEFAULT_INTERVAL = {"archive": 0.25, "log_dir": 0.25, "remote": 0.25}


def last(source: Any, spec: QuerySpec, columns: list[str], n: int) -> pa.Table:
    """The newest `n` matching records, oldest first."""
    import pyarrow as pa

    newest = dataclasses.replace(spec, order=("-ts",), limit=n)
    table = engine.read(source, newest, columns)
    return table.take(pa.array(range(table.num_rows - 1, -1, -1), pa.int64())) if table.num_rows > 1 else table


class _Recent:
    """The last `size` record keys shown (insertion order), to drop a record seen twice."""

    def __init__(self, size: int = RECENT_KEYS) -> None:
        self.size = size
        self._keys: OrderedDict[tuple[str, int], None] = OrderedDict()

    def fresh(self, table: pa.Table) -> pa.Table:
        """`table` without the rows already shown; remembers the rest."""
        import pyarrow as pa

        keep = []
        for key in zip(table.column("source_id").to_pylist(), table.column("offset").to_pylist(), strict=True):
            new = key not in self._keys
            keep.append(new)
            if new:
                self._keys[key] = None
        while len(self._keys) > self.size:
            self._keys.popitem(last=False)
        return table if all(keep) else table.filter(pa.array(keep, pa.bool_()))


def _in_time_order(batches: list[pa.RecordBatch], recent: _Recent, columns: list[str]) -> pa.Table | None:
    import pyarrow as pa

    batches = [b for b in batches if b.num_rows]
    if not batches:
        return None
    table = recent.fresh(pa.Table.from_batches(batches).sort_by([("ts", "ascending"), ("host", "ascending"),
                                                                  ("source_id", "ascending"), ("offset", "ascending")]))
    return table.select(columns) if table.num_rows else None


def follow(source: Any, spec: QuerySpec, columns: list[str], tail: int, *, interval: float | None = None,
           stop: threading.Event | None = None, heartbeat: bool = False) -> Iterator[pa.RecordBatch]:
    """The last `tail` matching records, then each new one as it arrives, until `stop` is set.

    With `heartbeat` an empty batch comes after each look that found nothing, so a consumer (the
    archive's ``/v1/tail``) gets a chance to notice that its client left.
    """
    stop = stop or threading.Event()
    interval = DEFAULT_INTERVAL.get(source.kind, 0.5) if interval is None else interval
    unordered = dataclasses.replace(spec, order=(), limit=None)
    if source.kind == "remote":
        yield from source.follow(unordered, columns, tail)
        return
    wanted = list(dict.fromkeys([*columns, "ts", "host", *KEY]))
    looks = _archive_looks(source, unordered, wanted, tail) if source.kind == "archive" \
        else _log_dir_looks(source, unordered, wanted, tail)
    recent = _Recent()
    first = True
    while not stop.is_set():
        found = _in_time_order(next(looks), recent, columns)
        if found is not None:
            yield from found.to_batches()
        elif heartbeat:
            import pyarrow as pa

            yield pa.RecordBatch.from_pylist([], schema=engine.schema_of(columns))
        if first:
            first = False
            continue
        stop.wait(interval)


def _archive_looks(source: ArchiveSource, spec: QuerySpec, wanted: list[str],
                   tail: int) -> Iterator[list[pa.RecordBatch]]:
    """The batches of each look: first the last `tail` records, then those of the files that appeared."""
    seen = {f.path for f in _recent_files(source, spec)}
    yield list(last(source, spec, wanted, tail).to_batches()) if tail else []
    while True:
        files = _recent_files(source, spec)
        new = [f for f in files if f.path not in seen and not _compacted(source, f)]
        seen = {f.path for f in files}
        yield _scan_new(source, new, spec, wanted) if new else []


def _scan_new(source: ArchiveSource, files: list[DataFile], spec: QuerySpec, wanted: list[str]) -> list[pa.RecordBatch]:
    """The matching records of `files`, joined with the archive's identity map (:mod:`.identity_join`)
    as every other read of it is: a rank learned after a file was stored reaches its records."""
    from .identity_join import plan

    join = plan(source, spec)
    if join is None:
        return [batch for _, batch in engine.scan_files(source, files, spec, wanted)]
    scanned = (batch for _, batch in engine.scan_files(source, files, join.spec, join.columns(wanted)))
    return [batch.select(wanted) for batch in join.batches(scanned)]


def _recent_files(source: ArchiveSource, spec: QuerySpec) -> list[DataFile]:
    since = time.time_ns() - LATE_S * 10**9
    return source.list_files(max(since, spec.start_ns or since), spec.end_ns)


def _compacted(source: ArchiveSource, data_file: DataFile) -> bool:
    import pyarrow.parquet as pq

    try:
        with source.filesystem.open_input_file(data_file.path) as stream:
            metadata = pq.ParquetFile(stream).metadata.metadata or {}
    except (OSError, ValueError):
        return True  # gone (compacted away) since the listing, or not readable as Parquet yet
    return metadata.get(COMPACTED_KEY) == b"1"


def _log_dir_looks(source: Any, spec: QuerySpec, wanted: list[str], tail: int) -> Iterator[list[pa.RecordBatch]]:
    import pyarrow as pa

    from ..parse.follow_dir import DirectoryFollower

    follower = DirectoryFollower(source.real_path, source.timezone)
    matches = list(engine.parsed_matches(follower.poll(), spec, wanted))
    if matches and tail:
        table = pa.Table.from_batches(matches).sort_by([("ts", "ascending")])
        yield list(table.slice(max(0, table.num_rows - tail)).to_batches())
    else:
        yield []
    while True:
        yield list(engine.parsed_matches(follower.poll(), spec, wanted))
