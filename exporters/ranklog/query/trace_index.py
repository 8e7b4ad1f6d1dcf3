"""A small trace index: which archive files hold a given trace id, so a lookup opens a handful of
files instead of scanning 30 days of ``trace_id`` columns.

Trace ids are random, so Parquet min/max statistics on the data files cannot prune them. The index
is one Parquet file per day, ``<root>/_ranklog_index/trace/date=YYYY-MM-DD.parquet``, holding the
distinct ``(trace_id, file)`` pairs of that day sorted by ``trace_id`` in small row groups: a lookup
reads the footers of the selected days and the one row group per day whose min/max covers the id.
The ``_`` prefix keeps the index invisible to pyarrow.dataset, DuckDB globs of ``date=*`` and the
archive's own listing. Each index file records the files (path and size) it covers.

Always correct, never stale: files the index does not cover (new flushes, compaction output) are
read directly, and indexed files that vanished are dropped. A day's index is rebuilt when enough of
it is uncovered (so the live day is re-indexed every few flushes, not on every query). The index is
written (temp file + atomic rename) only when the archive root is a local directory this process
may write; otherwise the mapping is built in memory and kept for the life of the process (the
archive's query endpoint).
"""

from __future__ import annotations

import json
import os
import threading
from collections import defaultdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

    from .sources import ArchiveSource, DataFile

INDEX_DIR = "_ranklog_index/trace"
_MANIFEST_KEY = b"ranklog.trace_index.files"
_ROW_GROUP = 8192
REBUILD_MIN_UNCOVERED_FILES = 4
REBUILD_UNCOVERED_FRACTION = 0.1

_memory: dict[tuple[str, str], tuple[dict[str, int], pa.Table]] = {}
_lock = threading.Lock()


def _relative(source: ArchiveSource, path: str) -> str:
    return path[len(source.root):].lstrip("/")


def _index_path(source: ArchiveSource, date: str) -> str | None:
    root = source.local_root
    if root is None or not os.access(root, os.W_OK):
        return None
    return os.path.join(root, INDEX_DIR, f"date={date}.parquet")


def _build(source: ArchiveSource, files: list[DataFile]) -> pa.Table:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    parts = []
    for f in files:
        column = pq.read_table(f.path, columns=["trace_id"], filesystem=source.filesystem).column("trace_id")
        ids = pc.unique(column.drop_null())
        if len(ids):
            parts.append(pa.table({"trace_id": ids.cast(pa.string()),
                                   "file": pa.array([_relative(source, f.path)] * len(ids), pa.string())}))
    if not parts:
        return pa.table({"trace_id": pa.array([], pa.string()), "file": pa.array([], pa.string())})
    return pa.concat_tables(parts).sort_by([("trace_id", "ascending"), ("file", "ascending")])


def _load(path: str) -> dict[str, int] | None:
    import pyarrow.parquet as pq

    try:
        metadata = pq.read_schema(path).metadata or {}
        return json.loads(metadata[_MANIFEST_KEY])
    except (OSError, KeyError, ValueError):
        return None


def _write(path: str, table: pa.Table, manifest: dict[str, int]) -> None:
    import pyarrow.parquet as pq

    os.makedirs(os.path.dirname(path), exist_ok=True)
    table = table.replace_schema_metadata({_MANIFEST_KEY: json.dumps(manifest).encode()})
    temp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{os.getpid()}.{threading.get_ident()}")
    try:
        pq.write_table(table, temp, row_group_size=_ROW_GROUP, compression="zstd")
        os.replace(temp, path)
    except OSError:
        if os.path.exists(temp):
            os.unlink(temp)


def _lookup_files(paths: list[str], trace_ids: tuple[str, ...]) -> set[str]:
    """Files named by the index files at `paths` for `trace_ids` (one parallel scan, stats-pruned)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    if not paths:
        return set()
    table = ds.dataset(paths, format="parquet").to_table(
        columns=["file"], filter=ds.field("trace_id").isin(pa.array(list(trace_ids), pa.string())))
    return set(table.column("file").to_pylist())


def _lookup_table(table: pa.Table, trace_ids: tuple[str, ...]) -> set[str]:
    import pyarrow as pa
    import pyarrow.compute as pc

    hits = table.filter(pc.is_in(table.column("trace_id"), pa.array(list(trace_ids), pa.string())))
    return set(hits.column("file").to_pylist())


def _needs_rebuild(manifest: dict[str, int], current: dict[str, int]) -> bool:
    uncovered = [name for name, size in current.items() if manifest.get(name) != size]
    if not uncovered:
        return False
    uncovered_bytes = sum(current[name] for name in uncovered)
    return (len(uncovered) >= REBUILD_MIN_UNCOVERED_FILES
            or uncovered_bytes > REBUILD_UNCOVERED_FRACTION * max(1, sum(current.values()))
            or not manifest)


def _fresh_index(source: ArchiveSource, date: str, files: list[DataFile]) -> tuple[dict[str, int], str | None,
                                                                              pa.Table | None]:
    """The day's index, rebuilt first when too much of the day is uncovered.

    Returns (manifest, index file path or None, in-memory index table or None).
    """

    def rebuild() -> tuple[dict[str, int], pa.Table]:
        # Index the whole day, not just the hours this query selected, so the next query reuses it.
        start = files[0].start_ns - files[0].hour * 3600 * 1_000_000_000
        day_files = source.list_files(start, start + 24 * 3600 * 1_000_000_000)
        return {_relative(source, f.path): f.size for f in day_files}, _build(source, day_files)

    current = {_relative(source, f.path): f.size for f in files}
    path = _index_path(source, date)
    if path is not None:
        manifest = (_load(path) if os.path.exists(path) else None) or {}
        if not _needs_rebuild(manifest, current):
            return manifest, path, None
        manifest, table = rebuild()
        _write(path, table, manifest)
        return manifest, None, table
    key = (source.label, date)
    with _lock:
        manifest, table = _memory.get(key, ({}, None))
    if table is None or _needs_rebuild(manifest, current):
        manifest, table = rebuild()
        with _lock:
            _memory[key] = (manifest, table)
    return manifest, None, table


def narrow_files(source: ArchiveSource, files: list[DataFile], trace_ids: tuple[str, ...]) -> list[DataFile]:
    """The subset of `files` that can hold any of `trace_ids` (order kept)."""
    by_date: dict[str, list[DataFile]] = defaultdict(list)
    for f in files:
        by_date[f.date].append(f)
    keep: set[str] = set()
    index_files: list[str] = []
    for date, day_files in by_date.items():
        manifest, path, table = _fresh_index(source, date, day_files)
        if path is not None:
            index_files.append(path)
        elif table is not None:
            keep |= _lookup_table(table, trace_ids)
        keep |= {_relative(source, f.path) for f in day_files
                 if manifest.get(_relative(source, f.path)) != f.size}  # not covered: must be read
    keep |= _lookup_files(index_files, trace_ids)
    return [f for f in files if _relative(source, f.path) in keep]
