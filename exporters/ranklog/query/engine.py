"""Run a :class:`~ranklog.query.filters.QuerySpec` over a source and stream the matching records.

How the archive is read (fastest first; measured in ``tests/benchmarks/bench_query.py``):

1. Partition pruning: only the ``date=/hour=`` directories overlapping the time range are listed.
2. Trace lookups consult the trace index (:mod:`ranklog.query.trace_index`) to open only the files
   that hold the wanted trace ids.
3. The filter is a pyarrow dataset expression, so Parquet row-group statistics skip row groups
   (time, level, host, rank…) and the remaining rows are filtered in Arrow's C++ kernels on all cores.
4. Message searches (``--regex`` / ``--contains``) take :mod:`ranklog.query.text_search` instead: the
   text columns first (with a literal prefilter), the other columns only for the matching rows.

Ordering and memory: hour partitions hold disjoint time ranges, so a time-ordered result is produced
one partition at a time (sorted by ``ts``, then host, source_id, offset for a stable order): memory
is bounded by the matching rows of one hour, never by the whole result. Other sort keys need the
whole result in memory. ``order=()`` streams in storage order.

Duplicates: an agent that failed over between archives may have had one batch stored by two of them.
Both copies carry the same ``ts`` and so land in the same hour partition; a partition is therefore
deduplicated by ``(source_id, offset)`` only when its files come from more than one archive id (the
file-name prefix), which costs nothing in the common single-writer case.

Allocator: scans use jemalloc (the system allocator where pyarrow lacks it). pyarrow's default
mimalloc pool kept ~90 MB more resident on a streaming export of 600k records (272 vs 182 MiB peak),
which is memory a query next to a training job should not take.

Files replaced while a scan reads them: compaction (and retention) replace an hour's files by one
holding the same rows and then delete the inputs (:mod:`ranklog.archive.replacement`), so a scan that
listed the inputs before and opens them after finds one gone. Until its first batch went out, a scan
lists again and starts over — the new listing shows the output (:func:`_relisting`); after that,
starting over would send rows twice, so it fails saying why. Counts start over the same way.

A raw log directory is parsed with the agent's parsers and filtered with the same expression, so both
sources give identical answers for the same records. Its time order needs all matches in memory.

Identity: records of an archive pass through the identity join (:mod:`.identity_join`) before the
filters on the columns it fills, so they carry what is known of their writer now, as the records of
a raw directory do (:mod:`ranklog.parse.directory` joins the same way over the folder).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing, contextmanager
from itertools import groupby
from typing import TYPE_CHECKING, Any, TypeVar

from ..conform import conform
from ..errors import UserError
from ..record import FIELDS, arrow_schema
from . import budget
from .filters import QuerySpec
from .text_search import is_text_search, search_files

if TYPE_CHECKING:
    import pyarrow as pa

    from .sources import ArchiveSource, DataFile

TIE_BREAK = ("host", "source_id", "offset")
DEDUP_KEY = ("source_id", "offset")
BATCH_ROWS = 65_536
COALESCE_ROWS = 8192
# Read-ahead bounds: pyarrow's defaults (16 batches x 4 files, and in practice whole files of a
# dataset) hold many decoded batches when the consumer is slower than the reader (an export).
READAHEAD_BATCHES = 2
READAHEAD_FILES = 2
CHUNK_FILES = 8
RELIST_ATTEMPTS = 3  # listings a scan may take when files it listed were replaced before it opened them
_Item = TypeVar("_Item")


def use_lean_memory_pool() -> None:
    """Make jemalloc (else the system allocator) pyarrow's default pool: it returns freed memory."""
    import pyarrow as pa

    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:
        pool = pa.system_memory_pool()
    pa.set_memory_pool(pool)


def check_columns(columns: Iterable[str] | None) -> list[str]:
    """The requested output columns (all record fields when None), validated."""
    if columns is None:
        return list(FIELDS)
    out = [c for c in columns]
    unknown = [c for c in out if c not in FIELDS]
    if unknown:
        raise UserError(f"unknown column(s) {', '.join(unknown)} (known: {', '.join(FIELDS)})")
    if not out:
        raise UserError("no columns selected")
    return out


def sort_keys(spec: QuerySpec) -> list[tuple[str, str]]:
    """Arrow sort keys for the spec's order, with a stable tie-break."""
    keys = [(key.lstrip("-"), "descending" if key.startswith("-") else "ascending") for key in spec.order]
    if not keys:
        return []
    direction = keys[0][1]
    named = {name for name, _ in keys}
    return keys + [(name, direction) for name in TIE_BREAK if name not in named]


def _internal_columns(spec: QuerySpec, columns: list[str], dedup: bool) -> list[str]:
    wanted = list(columns)
    extra: list[str] = [name for name, _ in sort_keys(spec)]
    if dedup:
        extra += list(DEDUP_KEY)
    if spec.attrs:
        extra.append("attrs")
    for name in extra:
        if name not in wanted:
            wanted.append(name)
    return wanted


def _sort(table: pa.Table, spec: QuerySpec) -> pa.Table:
    keys = sort_keys(spec)
    return table.sort_by(keys) if keys and table.num_rows > 1 else table


def dedup(table: pa.Table) -> pa.Table:
    """Keep the first row of each (source_id, offset) key."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if table.num_rows < 2:
        return table
    keys = table.select(list(DEDUP_KEY)).append_column("_row", pa.array(range(table.num_rows), pa.int64()))
    first = keys.group_by(list(DEDUP_KEY), use_threads=False).aggregate([("_row", "min")]).column("_row_min")
    if len(first) == table.num_rows:
        return table
    return table.take(pc.sort_indices(first))


def _batches(table: pa.Table) -> Iterator[pa.RecordBatch]:
    for batch in table.to_batches(max_chunksize=BATCH_ROWS):
        if batch.num_rows:
            yield batch


# -- archive ------------------------------------------------------------------------------------------
def _partitions_needing_dedup(files: list[DataFile]) -> set[tuple[str, int]]:
    writers: dict[tuple[str, int], set[str]] = {}
    for f in files:
        writers.setdefault(f.partition, set()).add(f.archive_id)
    return {partition for partition, ids in writers.items() if len(ids) > 1}


def select_files(source: ArchiveSource, spec: QuerySpec) -> list[DataFile]:
    """The archive files a spec has to read (partition pruning, then the trace index)."""
    files = source.list_files(spec.start_ns, spec.end_ns)
    if spec.trace_ids and files:
        from .trace_index import narrow_files

        files = narrow_files(source, files, spec.trace_ids)
    return files


def _archive_dataset(source: ArchiveSource, files: list[DataFile]) -> Any:
    import pyarrow.dataset as ds

    return ds.dataset([f.path for f in files], schema=arrow_schema(), format="parquet",
                      filesystem=source.filesystem)


def scan_files(source: ArchiveSource, files: list[DataFile], spec: QuerySpec,
               wanted: list[str]) -> Iterator[tuple[tuple[str, int], pa.RecordBatch]]:
    """(partition, batch) of the rows of `files` matching `spec` (columns `wanted`), file by file in the
    given order. This is the per-file work an engine may spread: :mod:`.ray_engine` runs it over
    chunks of whole hour partitions as Ray tasks and puts the results back in this order."""
    import pyarrow as pa

    if is_text_search(spec):
        yield from search_files(source, files, spec, wanted)
        return
    partition_of = {f.path: f.partition for f in files}
    expression = spec.expression()
    # One scanner per few files: pyarrow reads whole files ahead of a slow consumer (an export),
    # so chunking is what bounds memory; within a chunk files are still read in parallel.
    for first in range(0, len(files), CHUNK_FILES):
        chunk = files[first:first + CHUNK_FILES]
        scanner = _archive_dataset(source, chunk).scanner(
            columns=wanted, filter=expression, batch_size=BATCH_ROWS, use_threads=True,
            batch_readahead=READAHEAD_BATCHES, fragment_readahead=READAHEAD_FILES)
        try:
            for tagged_batch in scanner.scan_batches():
                budget.check()
                yield partition_of[tagged_batch.fragment.path], spec.python_filter(tagged_batch.record_batch)
        except pa.ArrowInvalid as exc:
            raise _legacy_ts_error(exc, chunk) from None


def count_rows(source: ArchiveSource, files: list[DataFile], spec: QuerySpec) -> int:
    """Rows of `files` matching `spec`'s expression, from Parquet statistics where they decide."""
    return _archive_dataset(source, files).count_rows(filter=spec.expression()) if files else 0


def _scan_archive(source: ArchiveSource, spec: QuerySpec, columns: list[str]) -> Iterator[pa.RecordBatch]:
    import pyarrow as pa

    files = select_files(source, spec)
    if not files:
        return
    needs_dedup = _partitions_needing_dedup(files)
    if spec.descending:
        order = {p: i for i, p in enumerate(sorted({f.partition for f in files}, reverse=True))}
        files = sorted(files, key=lambda f: order[f.partition])
    wanted = _internal_columns(spec, columns, bool(needs_dedup))
    runner = getattr(source, "runner", None)
    tagged = (runner.scan_files if runner is not None else scan_files)(source, files, spec, wanted)
    if not spec.order and not needs_dedup:
        yield from (batch for _, batch in tagged if batch.num_rows)
        return

    def partition_tables() -> Iterator[pa.Table]:
        running = budget.current()
        for partition, group in groupby(tagged, key=lambda item: item[0]):
            batches = [batch for _, batch in group if batch.num_rows]
            if not batches:
                continue
            table = pa.Table.from_batches(batches)
            held = table.nbytes if running is not None else 0
            if running is not None:  # a sorted answer holds an hour's matching rows at a time
                running.charge(held, "sorting an hour of matching records")
            try:
                yield dedup(table) if partition in needs_dedup else table
            finally:
                if running is not None:
                    running.release(held)

    if not spec.order or spec.sorted_by_time:
        for table in _coalesced(partition_tables()):
            yield from _batches(_sort(table, spec))
        return
    tables = list(partition_tables())
    if tables:
        yield from _batches(_sort(pa.concat_tables(tables), spec))


def _legacy_ts_error(exc: Exception, files: list[DataFile]) -> Exception:
    """Files of an archive older than µs `ts` whose times carry sub-µs digits cannot be read as µs
    without changing them: say so in one line (the archive's compaction rewrites those hours)."""
    if "would lose data" not in str(exc):
        return exc
    return UserError(f"{files[0].path} (or a file beside it) stores ts in nanoseconds with sub-microsecond "
                     "digits (written by an older ranklog); let `ranklog archive` compact the hour, which "
                     "rewrites it with ts in microseconds")


def _coalesced(tables: Iterator[pa.Table]) -> Iterator[pa.Table]:
    """Runs of consecutive partitions' tables, each run at least COALESCE_ROWS rows (or the rest).

    Hour partitions hold disjoint time ranges in order, so sorting a run by time gives the rows in
    the order sorting each partition would: one sort for many small hours instead of one per hour
    (720 sorts cost ~0.4 s in a search over 30 days with a few dozen matches per hour). Runs stay
    small: at BATCH_ROWS a streaming export's peak RSS grew by ~70 MiB (tests/query/test_memory.py).
    """
    import pyarrow as pa

    run: list[pa.Table] = []
    rows = 0
    for table in tables:
        run.append(table)
        rows += table.num_rows
        if rows >= COALESCE_ROWS:
            yield run[0] if len(run) == 1 else pa.concat_tables(run)
            run, rows = [], 0
    if run:
        yield run[0] if len(run) == 1 else pa.concat_tables(run)


def _vanished(exc: OSError) -> bool:
    """A file listed for this scan was gone when opened (pyarrow: FileNotFoundError when it checks the
    paths, an OSError with errno 2 / S3's NoSuchKey when it opens one later)."""
    text = str(exc)
    return isinstance(exc, FileNotFoundError) or "[errno 2]" in text.lower() or "NoSuchKey" in text


_DAMAGED = re.compile(r"Could not open Parquet input source '(?P<path>[^']+)': (?P<why>.+)")
DAMAGED_ATTEMPTS = 64  # files found damaged while reading, skipped one by one, before a scan gives up


def _damaged(exc: Exception) -> tuple[str, str] | None:
    """(path, why) when pyarrow failed to open a file of the scan as Parquet."""
    match = _DAMAGED.search(str(exc))
    return (match.group("path"), match.group("why").splitlines()[0]) if match else None


def _relisting(scan_once: Callable[[], Iterator[_Item]], source: Any = None) -> Iterator[_Item]:
    """`scan_once()`'s batches; if a file it listed vanished before the first batch went out, list and
    scan again (up to RELIST_ATTEMPTS listings). A file that turns out not to be readable Parquet is
    skipped from then on (``source.skip_unreadable``: a warning names it) and the scan starts over —
    or, when rows were already sent, fails saying to run it again."""
    import pyarrow as pa

    attempt = damaged = 0
    while True:
        attempt += 1
        sent = False
        try:
            with closing(scan_once()) as batches:
                for batch in batches:
                    sent = True
                    yield batch
            return
        except (OSError, pa.ArrowInvalid) as exc:
            found = _damaged(exc) if source is not None else None
            if found is not None and damaged < DAMAGED_ATTEMPTS:
                source.skip_unreadable(*found)
                if sent:
                    raise UserError(f"{found[0]} is not readable Parquet ({found[1]}), found after rows were sent; "
                                    "it is skipped from now on: run the query again") from None
                damaged += 1
                attempt -= 1
                continue
            if not isinstance(exc, OSError) or not _vanished(exc):
                raise
            if sent or attempt == RELIST_ATTEMPTS:
                raise FileNotFoundError(
                    f"{getattr(exc, 'filename', None) or exc}: replaced by the archive's compaction or retention while "
                    f"this query read its hour ({'after rows were sent' if sent else f'{attempt} listings'}); "
                    "run the query again") from exc


# -- raw log directory ------------------------------------------------------------------------------------
def parsed_matches(tables: Iterable[pa.Table | pa.RecordBatch], spec: QuerySpec,
                   wanted: list[str]) -> Iterator[pa.RecordBatch]:
    """The rows of parsers' output (`tables`) that match `spec`, as batches of the `wanted` columns."""
    expression = spec.expression()
    for table in tables:
        table = conform(table)
        if expression is not None:
            table = table.filter(expression)
        for batch in table.select(wanted).to_batches():
            batch = spec.python_filter(batch)
            if batch.num_rows:
                yield batch


def _scan_log_dir(source: Any, spec: QuerySpec, columns: list[str]) -> Iterator[pa.RecordBatch]:
    import pyarrow as pa

    wanted = _internal_columns(spec, columns, dedup=False)

    def matches() -> Iterator[pa.RecordBatch]:
        return parsed_matches(source.tables(), spec, wanted)

    if not spec.order:
        yield from matches()
        return
    found = list(matches())
    if found:
        yield from _batches(_sort(pa.Table.from_batches(found), spec))


# -- public ---------------------------------------------------------------------------------------------------
def _limited(batches: Iterator[pa.RecordBatch], limit: int | None) -> Iterator[pa.RecordBatch]:
    if limit is None:
        yield from batches
        return
    remaining = limit
    if remaining <= 0:
        return
    try:
        for batch in batches:
            if batch.num_rows >= remaining:
                yield batch.slice(0, remaining)
                return
            remaining -= batch.num_rows
            yield batch
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()


def scan(source: Any, spec: QuerySpec, columns: Iterable[str] | None = None) -> Iterator[pa.RecordBatch]:
    """Stream the records matching `spec` as record batches holding `columns` (all when None)."""
    selected = check_columns(columns)
    use_lean_memory_pool()
    if source.kind == "remote":
        yield from source.scan(spec, selected)
        return
    if source.kind == "archive":
        from .identity_join import plan

        join = plan(source, spec)
        if join is None:
            inner = _relisting(lambda: _scan_archive(source, spec, selected), source)
        else:
            inner = join.batches(_relisting(lambda: _scan_archive(source, join.spec, join.columns(selected)), source))
    else:
        inner = _scan_log_dir(source, spec, selected)
    for batch in _limited(inner, spec.limit):
        budget.check()
        yield batch.select(selected) if batch.schema.names != selected else batch


def schema_of(columns: Iterable[str]) -> pa.Schema:
    """The record schema narrowed to `columns`, in their order."""
    import pyarrow as pa

    return pa.schema([arrow_schema().field(name) for name in columns])


def read(source: Any, spec: QuerySpec, columns: Iterable[str] | None = None) -> pa.Table:
    """All matching records as one table (use :func:`scan` for results that may be large)."""
    import pyarrow as pa

    selected = check_columns(columns)
    batches = list(scan(source, spec, selected))
    schema = schema_of(selected)
    return pa.Table.from_batches(batches, schema=schema) if batches else schema.empty_table()


def count(source: Any, spec: QuerySpec) -> int:
    """How many records match (``limit`` caps it). Uses Parquet metadata where the filter allows."""
    unlimited = dataclasses.replace(spec, order=(), limit=None)
    if source.kind == "remote":
        total = source.count(unlimited)
    elif source.kind == "archive" and not spec.attrs and not is_text_search(spec) and not _joined_count(source, spec):
        total = sum(_relisting(lambda: _count_archive(source, spec, unlimited), source))
    else:
        # A search already holds the text columns after its first phase: counting them reads nothing more.
        counted = ["msg"] if is_text_search(spec) else ["ts"]
        total = sum(batch.num_rows for batch in scan(source, unlimited, counted))
    return total if spec.limit is None else min(total, spec.limit)


def _joined_count(source: ArchiveSource, spec: QuerySpec) -> bool:
    from .identity_join import changes_counts

    return changes_counts(source, spec)


def _count_archive(source: ArchiveSource, spec: QuerySpec, unlimited: QuerySpec) -> Iterator[int]:
    """The archive's count as one value (an iterator, so that :func:`_relisting` can start it over)."""
    files = select_files(source, spec)
    if not files:
        yield 0
    elif _partitions_needing_dedup(files):
        yield sum(batch.num_rows for batch in scan(source, unlimited, DEDUP_KEY))
    else:
        runner = getattr(source, "runner", None)
        yield (runner.count_rows if runner is not None else count_rows)(source, files, spec)


@contextmanager
def duckdb_over(source: Any, spec: QuerySpec, columns: list[str]) -> Iterator[Any]:
    """A DuckDB connection with the matching records (`columns` only, any order) as table `records`.

    Streams from :func:`scan`, so aggregates (stats, integrity) never hold the records in memory.
    """
    import duckdb
    import pyarrow as pa

    schema = pa.schema([arrow_schema().field(name) for name in columns])
    unordered = dataclasses.replace(spec, order=(), limit=None)
    reader = pa.RecordBatchReader.from_batches(schema, scan(source, unordered, columns))
    connection = duckdb.connect()
    try:
        connection.execute("SET threads TO 2")
        connection.execute("SET preserve_insertion_order = false")
        connection.register("records", reader)
        yield connection
    finally:
        connection.close()
