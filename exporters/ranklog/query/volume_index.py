"""Volume index: per day, the entries and line bytes of every stream per hour and for the whole day, so
"how much did each job log over 30 days" (Loki's ``index/volume``, Logs Drilldown's landing page)
reads 30 small files instead of the archive.

Layout: ``<root>/_ranklog_index/volume/date=YYYY-MM-DD.rlindex`` (storage, coverage and refresh are
:mod:`.day_index`'s: files the index does not cover are aggregated directly, so an answer is always
complete). Columns: ``bucket`` (start, int64 ns), ``span`` (:data:`HOUR_NS` or :data:`DAY_NS`: one
row per stream and hour, and one per stream for the day), the stream columns (``job``, ``host``,
``rank``, ``level``, ``format``) and the rest of a record's writer identity (``source_id``, ``pid``,
``local_rank``, ``role``: the key the read-side identity join fills rank, role, pid and host by, so
the rows can be joined like records), ``entries`` and ``bytes`` (of the Loki line: msg, plus a
newline and exc when there is one — what ``bytes_over_time`` counts).

:func:`volumes` cuts a time range into whole days (their day rows), whole hours (hour rows) and the
partial hours at either end (aggregated from the data), so counts are exact and 30 days cost 30 day
rows per stream; the day rows stay in memory once read (:class:`_DayRows`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ..archive_layout import DAY_NS, HOUR_NS
from . import budget
from .day_index import DayIndex, relative

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.dataset as ds

    from .sources import ArchiveSource, DataFile

STREAM_COLUMNS = ("job", "host", "rank", "level", "format")
KEY_COLUMNS = (*STREAM_COLUMNS, "source_id", "pid", "local_rank", "role")
# Small row groups: a day's rows come first (sorted by span, then bucket), so reading them skips the
# hour rows by the groups' statistics (3 ms instead of 40 for a day of 1,500 streams).
_ROW_GROUP = 4096
Scan = Callable[[int, int], "pa.Table"]


def line_bytes(table: pa.Table | pa.RecordBatch) -> pa.Array:
    """Bytes of each row's Loki line (msg, plus "\\n" + exc where there is one)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    size = pc.binary_length(table.column("msg").cast(pa.binary()))
    exc = pc.add(pc.binary_length(table.column("exc").cast(pa.binary())), 1)
    return pc.add(size, pc.coalesce(exc, 0)).cast(pa.int64())


def _schema() -> pa.Schema:
    import pyarrow as pa

    from ..record import arrow_schema

    record = arrow_schema()
    return pa.schema([pa.field("bucket", pa.int64()), pa.field("span", pa.int64()),
                      *(record.field(name).with_nullable(True) for name in KEY_COLUMNS),
                      pa.field("entries", pa.int64()), pa.field("bytes", pa.int64())])


def _grouped(table: pa.Table, buckets: pa.Array, span: int, count: str, size: str) -> pa.Table:
    import pyarrow as pa

    keyed = pa.table({"bucket": buckets, **{name: table.column(name) for name in KEY_COLUMNS},
                      "__entries": table.column(count), "__bytes": table.column(size)})
    grouped = keyed.group_by(["bucket", *KEY_COLUMNS], use_threads=False).aggregate(
        [("__entries", "sum"), ("__bytes", "sum")])
    return pa.table({"bucket": grouped.column("bucket"), "span": pa.array([span] * grouped.num_rows, pa.int64()),
                     **{name: grouped.column(name) for name in KEY_COLUMNS},
                     "entries": grouped.column("__entries_sum"), "bytes": grouped.column("__bytes_sum")}
                    ).cast(_schema())


def aggregate(table: pa.Table, span: int = HOUR_NS) -> pa.Table:
    """Rows with ts, the key columns, msg and exc → (bucket, span, keys…, entries, bytes) per `span`."""
    import numpy as np
    import pyarrow as pa

    from ..record import ts_ns

    with_sizes = pa.table({**{name: table.column(name) for name in KEY_COLUMNS},
                           "one": pa.array(np.ones(table.num_rows, np.int64)), "size": line_bytes(table)})
    buckets = pa.array(ts_ns(table.column("ts")) // span * span, pa.int64())
    return _grouped(with_sizes, buckets, span, "one", "size")


def _daily(hourly: pa.Table) -> pa.Table:
    import pyarrow as pa

    days = pa.array(hourly.column("bucket").to_numpy() // DAY_NS * DAY_NS, pa.int64())
    return _grouped(hourly, days, DAY_NS, "entries", "bytes")


def _build(source: ArchiveSource, files: list[DataFile]) -> pa.Table:
    import pyarrow as pa
    import pyarrow.parquet as pq

    hours = []
    for data_file in files:
        table = pq.read_table(data_file.path, columns=["ts", *KEY_COLUMNS, "msg", "exc"],
                              filesystem=source.filesystem)
        if table.num_rows:
            hours.append(aggregate(table))
    if not hours:
        return _schema().empty_table()
    merged = pa.concat_tables(hours)
    hourly = _grouped(merged, merged.column("bucket"), HOUR_NS, "entries", "bytes")  # several files of one hour
    return pa.concat_tables([_daily(hourly), hourly]).sort_by([("span", "descending"), ("bucket", "ascending")])


VOLUME_INDEX = DayIndex("volume", _build, _ROW_GROUP)


class _DayRows:
    """The day rows of index files, kept in memory by (path, modification time, size): an index file is
    replaced, never changed in place, so a kept table is the file's content. Logs Drilldown asks for the
    same volumes on every page; at most :attr:`MAX_ROWS` rows are kept, the least recently used go."""

    MAX_ROWS = 1_000_000

    def __init__(self) -> None:
        import threading
        from collections import OrderedDict

        self.tables: OrderedDict[tuple[str, int, int], pa.Table] = OrderedDict()
        self.lock = threading.Lock()

    @staticmethod
    def key(source: ArchiveSource, path: str) -> tuple[str, int, int]:
        info = source.filesystem.get_file_info(path)
        return (path, info.mtime_ns or 0, info.size or 0)

    def get(self, key: tuple[str, int, int]) -> pa.Table | None:
        with self.lock:
            table = self.tables.get(key)
            if table is not None:
                self.tables.move_to_end(key)
            return table

    def read(self, source: ArchiveSource, key: tuple[str, int, int]) -> pa.Table:
        import pyarrow.dataset as ds
        import pyarrow.parquet as pq

        table = self.get(key)
        if table is None:
            table = pq.read_table(key[0], filesystem=source.filesystem, filters=ds.field("span") == DAY_NS,
                                  schema=_schema())
            with self.lock:
                self.tables[key] = table
                while sum(kept.num_rows for kept in self.tables.values()) > self.MAX_ROWS and len(self.tables) > 1:
                    self.tables.popitem(last=False)
        return table


_DAY_ROWS = _DayRows()


def _index_rows(source: ArchiveSource, day_files: list[DataFile], date: str, window: ds.Expression,
                whole_day: bool) -> Iterator[pa.Table]:
    """The index rows of one day in `window` (its day rows when `whole_day`), and the same rows computed
    from files the index does not cover."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    manifest, path, table = VOLUME_INDEX.fresh(source, date, day_files)
    key = _DayRows.key(source, path) if path is not None else None
    if key is not None and _DAY_ROWS.get(key) is None and \
            pq.read_schema(key[0], filesystem=source.filesystem).names != _schema().names:
        manifest, path, table = VOLUME_INDEX.rebuilt(source, date, day_files)  # another version's index
        key = _DayRows.key(source, path) if path is not None else None
    if key is not None and whole_day:
        yield _DAY_ROWS.read(source, key)  # the file's day rows are the window's
    elif key is not None:
        yield pq.read_table(key[0], filesystem=source.filesystem, filters=window, schema=_schema())
    elif table is not None:
        yield table.filter(window)
    for data_file in day_files:
        if manifest.get(relative(source, data_file.path)) != data_file.size:
            raw = pq.read_table(data_file.path, columns=["ts", *KEY_COLUMNS, "msg", "exc"],
                                filesystem=source.filesystem)
            hourly = aggregate(raw)
            yield pa.concat_tables([_daily(hourly), hourly]).filter(window)


def volumes(source: ArchiveSource, start_ns: int, end_ns: int, expression: ds.Expression | None, scan: Scan,
            step_ns: int | None = None) -> pa.Table:
    """(bucket, span, stream columns, entries, bytes) of the records in [start_ns, end_ns) that `expression`
    (over the stream columns) selects: day rows for the whole days, hour rows for the whole hours of the
    other days, and ``scan(start, end)`` (matching rows: ts, the key columns, msg, exc) for the partial
    hours. With `step_ns` (a volume over time, cut at multiples of the step since the epoch as Loki
    cuts it) a whole day is its day row only when the cut does not split it."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    first_hour = -(-start_ns // HOUR_NS) * HOUR_NS
    last_hour = end_ns // HOUR_NS * HOUR_NS
    parts: list[pa.Table] = []
    if first_hour >= last_hour:  # no whole hour: scan it all
        return aggregate(scan(start_ns, end_ns))
    for low, high in ((start_ns, first_hour), (last_hour, end_ns)):
        if high > low:
            parts.append(aggregate(scan(low, high)))
    by_date: dict[str, list[DataFile]] = {}
    for data_file in source.list_files(first_hour, last_hour):
        by_date.setdefault(data_file.date, []).append(data_file)
    for date, day_files in by_date.items():
        budget.check()
        day_start = day_files[0].start_ns - day_files[0].hour * HOUR_NS
        whole = first_hour <= day_start and day_start + DAY_NS <= last_hour and \
            (step_ns is None or day_start // step_ns == (day_start + DAY_NS - HOUR_NS) // step_ns)
        if whole:
            window = (ds.field("span") == DAY_NS) & (ds.field("bucket") == day_start)
        else:
            window = (ds.field("span") == HOUR_NS) & (ds.field("bucket") >= max(first_hour, day_start)) & \
                (ds.field("bucket") < min(last_hour, day_start + DAY_NS))
        parts += list(_index_rows(source, day_files, date, window, whole))
    parts = [part for part in parts if part.num_rows]
    if not parts:
        return _schema().empty_table()
    rows = pa.concat_tables(parts)
    return rows if expression is None else rows.filter(expression)  # one filter for every day
