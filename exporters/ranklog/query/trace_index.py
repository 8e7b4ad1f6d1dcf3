"""A small trace index: which archive files hold a given trace id, so a lookup opens a handful of
files instead of scanning 30 days of ``trace_id`` columns.

Trace ids are random, so Parquet min/max statistics on the data files cannot prune them. The index
is one Parquet file per day, ``<root>/_ranklog_index/trace/date=YYYY-MM-DD.rlindex``, holding the
distinct ``(trace_id, file)`` pairs of that day sorted by ``trace_id`` in small row groups: a lookup
reads the footers of the selected days and the one row group per day whose min/max covers the id.
Storage, coverage and refresh are :mod:`.day_index`'s: files the index does not cover are read
directly, so a lookup is always complete.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from ..archive_layout import INDEX_ROOT
from .day_index import DayIndex, relative

if TYPE_CHECKING:
    import pyarrow as pa

    from .sources import ArchiveSource, DataFile

_ROW_GROUP = 8192


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
                                   "file": pa.array([relative(source, f.path)] * len(ids), pa.string())}))
    if not parts:
        return pa.table({"trace_id": pa.array([], pa.string()), "file": pa.array([], pa.string())})
    return pa.concat_tables(parts).sort_by([("trace_id", "ascending"), ("file", "ascending")])


TRACE_INDEX = DayIndex("trace", _build, _ROW_GROUP)
INDEX_DIR = f"{INDEX_ROOT}/{TRACE_INDEX.kind}"


def _lookup_files(filesystem: Any, paths: list[str], trace_ids: tuple[str, ...]) -> set[str]:
    """Files named by the index files at `paths` for `trace_ids` (one parallel scan, stats-pruned)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    if not paths:
        return set()
    table = ds.dataset(paths, format="parquet", filesystem=filesystem).to_table(
        columns=["file"], filter=ds.field("trace_id").isin(pa.array(list(trace_ids), pa.string())))
    return set(table.column("file").to_pylist())


def _lookup_table(table: pa.Table, trace_ids: tuple[str, ...]) -> set[str]:
    import pyarrow as pa
    import pyarrow.compute as pc

    hits = table.filter(pc.is_in(table.column("trace_id"), pa.array(list(trace_ids), pa.string())))
    return set(hits.column("file").to_pylist())


def narrow_files(source: ArchiveSource, files: list[DataFile], trace_ids: tuple[str, ...]) -> list[DataFile]:
    """The subset of `files` that can hold any of `trace_ids` (order kept)."""
    by_date: dict[str, list[DataFile]] = defaultdict(list)
    for f in files:
        by_date[f.date].append(f)
    keep: set[str] = set()
    index_files: list[str] = []
    for date, day_files in by_date.items():
        manifest, path, table = TRACE_INDEX.fresh(source, date, day_files)
        if path is not None:
            index_files.append(path)
        elif table is not None:
            keep |= _lookup_table(table, trace_ids)
        keep |= {relative(source, f.path) for f in day_files
                 if manifest.get(relative(source, f.path)) != f.size}  # not covered: must be read
    keep |= _lookup_files(source.filesystem, index_files, trace_ids)
    return [f for f in files if relative(source, f.path) in keep]
