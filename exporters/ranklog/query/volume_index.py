"""Volume index: per day, the entries and line bytes of every stream in each 5-minute bucket, so
"how much did each job log over 30 days" (Loki's ``index/volume``, Logs Drilldown's landing page)
reads 30 small files instead of the archive.

Layout: ``<root>/_ranklog_index/volume/date=YYYY-MM-DD.rlindex`` (storage, coverage and refresh are
:mod:`.day_index`'s: files the index does not cover are aggregated directly, so an answer is always
complete). Columns: ``bucket`` (bucket start, int64 ns), the stream columns (``job``, ``host``,
``rank``, ``level``, ``format``), ``entries`` and ``bytes`` (of the Loki line: msg, plus a newline
and exc when there is one — what ``bytes_over_time`` counts).

A time range that does not start or end on a bucket boundary takes its partial first and last
buckets from the data files (at most 5 minutes each), so counts are exact.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from . import budget
from .day_index import DayIndex, relative

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.dataset as ds

    from .sources import ArchiveSource, DataFile

BUCKET_NS = 300 * 10**9
STREAM_COLUMNS = ("job", "host", "rank", "level", "format")
_ROW_GROUP = 65_536


def line_bytes(table: pa.Table | pa.RecordBatch) -> pa.Array:
    """Bytes of each row's Loki line (msg, plus "\\n" + exc where there is one)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    size = pc.binary_length(table.column("msg").cast(pa.binary()))
    exc = pc.add(pc.binary_length(table.column("exc").cast(pa.binary())), 1)
    return pc.add(size, pc.coalesce(exc, 0)).cast(pa.int64())


def aggregate(table: pa.Table) -> pa.Table:
    """Rows with ts, the stream columns, msg and exc → (bucket, streams…, entries, bytes)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..record import ts_ns

    buckets = ts_ns(table.column("ts")) // BUCKET_NS * BUCKET_NS
    keyed = pa.table({"bucket": pa.array(buckets, pa.int64()),
                      **{name: table.column(name) for name in STREAM_COLUMNS},
                      "__bytes": line_bytes(table)})
    grouped = keyed.group_by(["bucket", *STREAM_COLUMNS], use_threads=False).aggregate(
        [("__bytes", "count"), ("__bytes", "sum")])
    return pa.table({"bucket": grouped.column("bucket"), **{name: grouped.column(name) for name in STREAM_COLUMNS},
                     "entries": pc.cast(grouped.column("__bytes_count"), pa.int64()),
                     "bytes": pc.cast(grouped.column("__bytes_sum"), pa.int64())})


def _schema() -> pa.Schema:
    import pyarrow as pa

    from ..record import arrow_schema

    record = arrow_schema()
    return pa.schema([pa.field("bucket", pa.int64()), *(record.field(name).with_nullable(True) for name in STREAM_COLUMNS),
                      pa.field("entries", pa.int64()), pa.field("bytes", pa.int64())])


def _build(source: ArchiveSource, files: list[DataFile]) -> pa.Table:
    import pyarrow as pa
    import pyarrow.parquet as pq

    parts = []
    for data_file in files:
        table = pq.read_table(data_file.path, columns=["ts", *STREAM_COLUMNS, "msg", "exc"],
                              filesystem=source.filesystem)
        if table.num_rows:
            parts.append(aggregate(table).cast(_schema()))
    if not parts:
        return _schema().empty_table()
    merged = pa.concat_tables(parts)
    # The same (bucket, stream) from several files of the day: add them up.
    grouped = merged.group_by(["bucket", *STREAM_COLUMNS], use_threads=False).aggregate(
        [("entries", "sum"), ("bytes", "sum")])
    out = pa.table({"bucket": grouped.column("bucket"), **{name: grouped.column(name) for name in STREAM_COLUMNS},
                    "entries": grouped.column("entries_sum"), "bytes": grouped.column("bytes_sum")})
    return out.cast(_schema()).sort_by([("bucket", "ascending")])


VOLUME_INDEX = DayIndex("volume", _build, _ROW_GROUP)


def _bucketed(source: ArchiveSource, files: list[DataFile], start_ns: int, end_ns: int,
              expression: ds.Expression | None) -> Iterator[pa.Table]:
    """Index rows for whole buckets inside [start_ns, end_ns) of `files`' days (uncovered files read directly)."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    by_date: dict[str, list[DataFile]] = {}
    for data_file in files:
        by_date.setdefault(data_file.date, []).append(data_file)
    window = (ds.field("bucket") >= start_ns) & (ds.field("bucket") < end_ns)
    wanted = window if expression is None else window & expression
    for date, day_files in by_date.items():
        budget.check()
        manifest, path, table = VOLUME_INDEX.fresh(source, date, day_files)
        covered = {relative(source, f.path) for f in day_files if manifest.get(relative(source, f.path)) == f.size}
        if path is not None:
            yield pq.read_table(path, filesystem=source.filesystem, filters=wanted)
        elif table is not None:
            yield table.filter(wanted)
        for data_file in day_files:
            if relative(source, data_file.path) not in covered:
                raw = pq.read_table(data_file.path, columns=["ts", *STREAM_COLUMNS, "msg", "exc"],
                                    filesystem=source.filesystem)
                rows = aggregate(raw).cast(_schema())
                yield rows.filter(pc.and_kleene(pc.greater_equal(rows["bucket"], start_ns),
                                                pc.less(rows["bucket"], end_ns)))


def volumes(source: ArchiveSource, start_ns: int, end_ns: int, expression: ds.Expression | None,
            scan: Any) -> pa.Table:
    """(bucket, stream columns, entries, bytes) of the records in [start_ns, end_ns) that `expression`
    (over the stream columns) selects. Whole buckets come from the index; the partial buckets at
    either end from ``scan(start, end)``, a function returning matching rows (ts, streams, msg, exc)."""
    import pyarrow as pa

    first_whole = -(-start_ns // BUCKET_NS) * BUCKET_NS
    last_whole = end_ns // BUCKET_NS * BUCKET_NS
    parts: list[pa.Table] = []
    if first_whole >= last_whole:  # no whole bucket: scan it all
        parts.append(aggregate(scan(start_ns, end_ns)).cast(_schema()))
    else:
        files = source.list_files(first_whole, last_whole)
        parts += list(_bucketed(source, files, first_whole, last_whole, expression))
        for low, high in ((start_ns, first_whole), (last_whole, end_ns)):
            if high > low:
                parts.append(aggregate(scan(low, high)).cast(_schema()))
    parts = [part for part in parts if part.num_rows]
    return pa.concat_tables(parts) if parts else _schema().empty_table()

