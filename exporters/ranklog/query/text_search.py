"""Archive scan for message searches (``--regex`` / ``--contains``): two phases per file, files in parallel.

Why not the plain dataset scan: a search reads every message of the range, and the dataset scanner
decodes all requested columns of every row and runs RE2 once per row before the filter drops ~all
of them. Measured per 13.8k-row hourly file of the benchmark (idle machine, CPU): decoding msg+exc
~2.0 ms (zstd alone ~1.9 ms for msg), the other 18 columns ~2.8 ms, RE2 over every row ~4 ms, a
byte search of a required literal over the columns' data buffers ~0.6 ms.

Compacted files carry a text skip index (:mod:`ranklog.text_index`): compaction keeps the ERROR and
CRITICAL rows in row groups of their own, each with a bitmap of its text's trigrams, so a search
whose pattern has required literals first drops every row group that cannot hold them, without
reading it. Searching for a failure message then decodes the few severe rows instead of the whole
range — what makes bench_query (c) faster than ``grep`` over the raw JSONL, which the decoding alone
(~2.7 ms per 13.9k-row file for msg + exc) was not.

So, per row group the index does not rule out:

1. Phase 1 streams (batches of :data:`BATCH_ROWS` rows, so memory stays bounded however large the
   row group) only ``msg``, ``exc`` and the columns the other filters need. When the pattern has
   a required literal (:mod:`ranklog.query.literals`), the rows whose text holds it are found with
   ``bytes.find`` over the Arrow data buffers; the spec's own filter expression is then evaluated on
   those candidate rows only, so the answer is exactly the expression's (the prefilter only has to
   keep every row that can match). Without a literal, or when the literal is common (more than
   :data:`MAX_CANDIDATE_FRACTION` of the rows), the expression runs on every row.
2. Phase 2 runs only for row groups with matches: it reads the remaining requested columns of the
   row group (dictionary-encoded strings stay dictionaries until the matching rows are taken, which
   halves their decoding) and takes the matching rows. Parquet decodes whole pages, so a row group
   with one match costs as much as one with many: this phase is what a search with matches spread
   over every file pays (see ``tests/benchmarks/bench_query.py``); ``count`` never runs it.

Files are searched by a small thread pool (pyarrow and zstd release the GIL) with a bounded
look-ahead, and results come back in file order, so the engine's per-partition ordering and
de-duplication apply unchanged. Row groups are pruned by their statistics first when the spec has
filters besides the text (time, level, host …), as the dataset scanner would.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

from .. import text_index
from ..conform import conform
from ..record import arrow_schema
from . import budget
from .filter_arrow import text_condition
from .literals import required_literals
from .severe_index import plan_days

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from .filters import QuerySpec
    from .sources import ArchiveSource, DataFile

TEXT_COLUMNS = ("msg", "exc")
BATCH_ROWS = 65_536
MIN_LITERAL_BYTES = 3
MAX_CANDIDATE_FRACTION = 1 / 16
ROW_COLUMN = "__row"
T = TypeVar("T")
R = TypeVar("R")


def is_text_search(spec: QuerySpec) -> bool:
    return spec.contains is not None or spec.regex is not None


def search_literals(spec: QuerySpec) -> list[bytes]:
    """The strings (UTF-8, ≥ MIN_LITERAL_BYTES) every matching row's msg or exc holds."""
    found: list[str] = []
    if spec.contains is not None and not spec.ignore_case:
        found.append(spec.contains)
    if spec.regex is not None:
        found += required_literals(spec.regex, spec.ignore_case)
    return [encoded for encoded in (text.encode() for text in found) if len(encoded) >= MIN_LITERAL_BYTES]


def filter_columns(spec: QuerySpec) -> list[str]:
    """The columns the spec's filter expression reads, the text columns first."""
    return [*TEXT_COLUMNS, *(name for name in spec.filter_columns() if name not in TEXT_COLUMNS)]


def _has_other_filters(spec: QuerySpec) -> bool:
    return len(filter_columns(spec)) > len(TEXT_COLUMNS)


# -- phase 1: candidate rows ----------------------------------------------------------------------------
def _rows_holding(array: pa.Array, literal: bytes, limit: int) -> np.ndarray | None:
    """Sorted row numbers of `array` (string) whose value may contain `literal`; None past `limit` hits."""
    import numpy as np

    offsets, buffer = text_index.string_values(array)
    start, end = int(offsets[0]), int(offsets[-1])
    if end <= start:
        return np.empty(0, np.int64)
    data = buffer[start:end].tobytes()
    hits: list[int] = []
    position = data.find(literal)
    while position >= 0:
        hits.append(position)
        if len(hits) > limit:
            return None
        position = data.find(literal, position + 1)
    if not hits:
        return np.empty(0, np.int64)
    positions = np.asarray(hits, np.int64) + start
    rows = np.searchsorted(offsets, positions, side="right") - 1
    inside = positions + len(literal) <= offsets[rows + 1]  # a hit across two values matches neither
    return np.unique(rows[inside].astype(np.int64))


def candidate_rows(table: pa.Table, literal: bytes | None) -> np.ndarray | None:
    """Rows of `table` whose msg or exc holds `literal`; None means every row is a candidate."""
    import numpy as np

    if literal is None:
        return None
    limit = max(64, int(table.num_rows * MAX_CANDIDATE_FRACTION))
    found = []
    for name in TEXT_COLUMNS:
        base = 0
        for chunk in table.column(name).chunks:
            rows = _rows_holding(chunk, literal, limit)
            if rows is None:
                return None
            found.append(rows + base)
            base += len(chunk)
    return np.unique(np.concatenate(found)) if found else np.empty(0, np.int64)


# -- reading --------------------------------------------------------------------------------------------
def _dictionary_columns(metadata: pq.FileMetaData, names: list[str]) -> list[str]:
    """The string columns among `names` stored dictionary-encoded in every row group."""
    import pyarrow as pa

    groups = [metadata.row_group(rg) for rg in range(metadata.num_row_groups)]
    paths = {groups[0].column(i).path_in_schema: i for i in range(metadata.num_columns)} if groups else {}
    schema = arrow_schema()
    return [name for name in names
            if name in paths and pa.types.is_string(schema.field(name).type)
            and all(group.column(paths[name]).has_dictionary_page for group in groups)]


def _take(file: pq.ParquetFile, row_group: int, rows: np.ndarray, names: list[str]) -> pa.Table:
    """Columns `names` (all stored in the file) of the rows `rows` of one row group.

    The whole row group is decoded at once (only for groups with matches): measured ~20% less CPU
    and half the wall time of streaming it in batches, for memory bounded by one row group's
    non-text columns.
    """
    import pyarrow as pa

    return file.read_row_group(row_group, columns=names, use_threads=False).take(pa.array(rows))


def _row_groups(data_file: DataFile, source: ArchiveSource, metadata: pq.FileMetaData, spec: QuerySpec,
                expression: ds.Expression) -> list[int]:
    """Row groups whose statistics may match (all of them when only the text is filtered)."""
    import pyarrow.dataset as ds

    if not _has_other_filters(spec):
        return list(range(metadata.num_row_groups))
    fragment = ds.ParquetFileFormat().make_fragment(data_file.path, filesystem=source.filesystem)
    return [rg.id for rg in fragment.subset(filter=expression, schema=arrow_schema()).row_groups]


def _text_matches(spec: QuerySpec, table: pa.Table, literal: bytes | None, other_filters: ds.Expression | None,
                  base: int) -> pa.Table:
    """Rows of `table` (phase-1 columns) matching the spec, with their row number + `base` in ROW_COLUMN."""
    import numpy as np
    import pyarrow as pa

    rows = candidate_rows(table, literal)
    if rows is None:
        rows = np.arange(table.num_rows, dtype=np.int64)
    candidates = table.take(pa.array(rows)).append_column(ROW_COLUMN, pa.array(rows + base, pa.int64()))
    hits = candidates.filter(text_condition(spec, candidates.column("msg"), candidates.column("exc")))
    if other_filters is not None and hits.num_rows:
        hits = hits.filter(other_filters)  # the rest of the spec, on the few text matches
    return hits


def _indexed_out(file: pq.ParquetFile, literals: list[bytes]) -> set[int]:
    """Row groups the file's text index (compacted files) proves cannot hold all of `literals`."""
    bitmaps = text_index.decode(file.metadata.metadata) if literals else None
    if bitmaps is None or len(bitmaps) != file.metadata.num_row_groups:
        return set()
    return {row_group for row_group, bitmap in enumerate(bitmaps) if not text_index.may_contain(bitmap, literals)}


def search_file(source: ArchiveSource, data_file: DataFile, spec: QuerySpec, expression: ds.Expression,
                other_filters: ds.Expression | None, literals: list[bytes], columns: list[str],
                only: list[int] | None = None) -> pa.Table | None:
    """The rows of one archive file matching `expression` (the spec's), as a table of `columns`;
    `only`: the row groups to consider (the severe index answers for the others)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    first = filter_columns(spec)
    # Coalesced reads only pay off on object storage; locally they cost wall time (measured).
    options = {"filesystem": source.filesystem, "pre_buffer": source.local_root is None}
    file = pq.ParquetFile(data_file.path, **options)
    stored = set(file.schema_arrow.names)
    rest = [name for name in columns if name not in first and name in stored]
    if rest:  # reopen (footer reused) so dictionary-encoded strings decode as dictionaries
        file = pq.ParquetFile(data_file.path, metadata=file.metadata, **options,
                              read_dictionary=_dictionary_columns(file.metadata, rest))
    readable = [name for name in first if name in stored]
    literal = max(literals, key=len, default=None)
    skipped = _indexed_out(file, literals)
    found = []
    for row_group in _row_groups(data_file, source, file.metadata, spec, expression):
        if row_group in skipped or (only is not None and row_group not in only):
            continue
        matched = []
        base = 0
        for batch in file.iter_batches(BATCH_ROWS, row_groups=[row_group], columns=readable, use_threads=False):
            hits = _text_matches(spec, conform(batch, first), literal, other_filters, base)
            if hits.num_rows:
                matched.append(hits)
            base += batch.num_rows
        if not matched:
            continue
        hits = pa.concat_tables(matched)
        rows = hits.column(ROW_COLUMN).to_numpy()
        if rest:
            for name, column in zip(rest, _take(file, row_group, rows, rest).columns, strict=True):
                hits = hits.append_column(name, column)
        found.append(conform(hits, columns))
    return pa.concat_tables(found) if found else None


# -- parallel, in order -----------------------------------------------------------------------------------
def _in_order(function: Callable[[T], R], items: list[T], workers: int, ahead: int) -> Iterator[R]:
    """`function` over `items` on `workers` threads, results in item order, at most `ahead` in flight."""
    pending: deque[Future[R]] = deque()
    remaining = iter(items)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ranklog-search") as pool:
        try:
            for item in remaining:
                pending.append(pool.submit(function, item))
                if len(pending) >= ahead:
                    break
            while pending:
                result = pending.popleft().result()
                for item in remaining:
                    pending.append(pool.submit(function, item))
                    break
                yield result
        finally:
            for future in pending:
                future.cancel()


def search_files(source: ArchiveSource, files: list[DataFile], spec: QuerySpec,
                 columns: list[str]) -> Iterator[tuple[tuple[str, int], pa.RecordBatch]]:
    """(partition, batch) of the rows matching `spec` in `files`, file by file in the given order.

    With required literals, each day's severe-rows index (:mod:`.severe_index`) answers for the
    covered files' ERROR/CRITICAL row groups; its hits for an hour come just before that hour's files.
    Memory: at most three days' index hits at a time.
    """
    expression = spec.expression()
    other_filters = dataclasses.replace(spec, contains=None, regex=None).expression()  # all but the text
    literals = search_literals(spec)
    plans = plan_days(source, files, literals) if literals else {}
    import pyarrow as pa

    # Arrow's CPU pool size: the machine's cores, or what a Ray task was given (ray_engine sets it).
    workers = max(1, min(len(files), pa.cpu_count()))

    def one(data_file: DataFile) -> tuple[DataFile, pa.Table | None]:
        plan = plans.get(data_file.date)
        only = plan.row_groups[data_file.path] if plan is not None else None
        if only == []:
            return data_file, None  # nothing outside the index can match: the file is not opened
        return data_file, search_file(source, data_file, spec, expression, other_filters, literals, columns, only)

    # Each day's index hits are read on a thread of their own, a day ahead of the files' results.
    days = list(dict.fromkeys(data_file.date for data_file in files)) if plans else []
    hits = _in_order(lambda date: plans[date].hits(expression, columns), days, workers=1, ahead=2)
    day, day_hits, started = None, {}, set()
    for data_file, table in _in_order(one, files, workers, ahead=2 * workers):
        budget.check()
        if data_file.partition not in started:
            started.add(data_file.partition)
            if plans and data_file.date != day:
                day, day_hits = data_file.date, next(hits)
            table = _joined(day_hits.pop(data_file.partition, None), table)
        if table is not None:
            for batch in table.to_batches(max_chunksize=BATCH_ROWS):
                yield data_file.partition, spec.python_filter(batch)


def _joined(first: pa.Table | None, second: pa.Table | None) -> pa.Table | None:
    import pyarrow as pa

    if first is None or second is None:
        return first if second is None else second
    return pa.concat_tables([first, second])
