"""Severe-rows index: a day's ERROR and CRITICAL rows in one file, so a failure search reads a file
per day instead of one per hour.

Why: compaction already keeps each hour's ERROR/CRITICAL rows in row groups of their own, and the
text index (:mod:`ranklog.text_index`) lets a message search skip the rest. But a failure message
occurs in most hours, so a search over 30 days still opens 720 files and decodes ~20 small column
chunks in each: bench_query (c) measured pyarrow's threaded scan of just those row groups at 1.65 s,
slower than ``grep`` over the raw JSONL (0.96 s). Those fixed costs per file, not the bytes, are the
bill. Here the same rows sit in one file per day, sorted by message template (so the rows of one
failure cluster into a few row groups), with a text index per row group of their own.

Layout: ``<root>/_ranklog_index/severe/date=YYYY-MM-DD.rlindex`` (storage, coverage and refresh are
:mod:`.day_index`'s). It holds every column of the pure ERROR/CRITICAL row groups of the day's
compacted files plus ``__file`` (the data file each row came from), ordered by message template.
Its footer carries, per data file, the text-index bitmaps of that file's *other* row groups, so a
search knows without opening a data file whether anything else in it can match. Files without a
text index (flush files not compacted yet) are searched whole, as are files the index does not cover.

The index is only kept on disk (a local, writable root); without one, searches read the data files
as before. The answer is exactly the one without the index: a covered file's severe row groups are
answered from the index and its other row groups from the file; rows of files that are gone
(compacted away, expired) are dropped; the index rows are the data files' rows, filtered by the
same expression. Cost: ~10 % of the archive's bytes (the severe rows a second time, zstd), built
when a search first needs a day (or after the day changed enough), like the trace index.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import text_index
from ..archive_layout import SEVERE_LEVELS
from ..conform import conform
from ..record import FIELDS, arrow_schema
from .day_index import DayIndex, relative

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from .sources import ArchiveSource, DataFile

ROW_GROUP_ROWS = 2048
FILE_COLUMN = "__file"
PLAN_KEY = b"ranklog.severe_index.files"  # {file: [[row group, bitmap number], ...] | null (search it whole)}
OTHER_BITMAPS_KEY = b"ranklog.severe_index.other_text_index"


def _schema() -> pa.Schema:
    import pyarrow as pa

    return arrow_schema().append(pa.field(FILE_COLUMN, pa.string(), nullable=False))


def _severe_levels() -> pa.Array:
    import pyarrow as pa

    return pa.array(SEVERE_LEVELS, pa.string())


def _split(source: ArchiveSource, data_file: DataFile) -> tuple[pa.Table | None, list[tuple[int, bytes]] | None]:
    """(rows of the file's pure ERROR/CRITICAL row groups, [(row group, text bitmap)] of the others);
    (None, None) for a file without a text index, which searches read whole."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq


    file = pq.ParquetFile(data_file.path, filesystem=source.filesystem)
    bitmaps = text_index.decode(file.metadata.metadata)
    if bitmaps is None or len(bitmaps) != file.metadata.num_row_groups or "level" not in file.schema_arrow.names:
        return None, None
    severe, others = [], []
    for group in range(file.metadata.num_row_groups):
        levels = file.read_row_group(group, columns=["level"], use_threads=False).column("level")
        if pc.all(pc.is_in(levels, value_set=_severe_levels())).as_py() is not False:
            severe.append(group)
        else:
            others.append((group, bitmaps[group]))
    rows = conform(file.read_row_groups(severe, use_threads=False), list(FIELDS)) if severe else None
    return rows, others


def _template_order(table: pa.Table) -> pa.Array:
    """Row order by message template (the message with its numbers masked), then time: the rows
    of one failure kind sit together even when their messages start with a rank or a pid, so a
    search for it keeps few row groups. In bench_query (c), a day's NCCL-watchdog rows of one
    collective type spread over 3 of 13 row groups sorted by raw message."""
    import pyarrow as pa
    import pyarrow.compute as pc

    template = pc.replace_substring_regex(table.column("msg"), r"[0-9]+", "#")
    return pc.sort_indices(pa.table({"template": template, "ts": table.column("ts")}),
                           sort_keys=[("template", "ascending"), ("ts", "ascending")])


def _build(source: ArchiveSource, files: list[DataFile]) -> pa.Table:
    import pyarrow as pa

    tables, plan, bitmaps = [], {}, []
    for data_file in files:
        name = relative(source, data_file.path)
        rows, others = _split(source, data_file)
        if others is None:
            plan[name] = None
            continue
        plan[name] = [[group, len(bitmaps) + number] for number, (group, _) in enumerate(others)]
        bitmaps += [bitmap for _, bitmap in others]
        if rows is not None and rows.num_rows:
            tables.append(rows.append_column(FILE_COLUMN, pa.array([name] * rows.num_rows, pa.string())))
    schema = _schema()
    table = pa.concat_tables(tables).cast(schema) if tables else schema.empty_table()
    table = table.take(_template_order(table)).combine_chunks()
    groups = [table.slice(start, ROW_GROUP_ROWS) for start in range(0, table.num_rows, ROW_GROUP_ROWS)]
    return table.replace_schema_metadata({
        text_index.METADATA_KEY: text_index.encode([text_index.build(group) for group in groups]),
        PLAN_KEY: json.dumps(plan).encode(),
        OTHER_BITMAPS_KEY: text_index.encode(bitmaps),
    })


SEVERE_INDEX = DayIndex("severe", _build, ROW_GROUP_ROWS, zstd_level=12)  # 7 % smaller than zstd-1


@dataclass
class DayPlan:
    """What a search with `literals` reads for one day: the index's candidate rows and, per data file,
    which row groups (None: all of them; []: none, the file is not opened)."""

    row_groups: dict[str, list[int] | None]
    covered: dict[str, tuple[str, int]]  # covered file (relative) → its partition
    index_path: str | None
    index_filesystem: Any  # the archive's pyarrow filesystem, where index_path is
    index_metadata: pq.FileMetaData | None  # the index file's footer, read once by plan_day
    index_table: pa.Table | None
    index_bitmaps: list[bytes] | None
    literals: list[bytes]

    def hits(self, expression: ds.Expression, columns: list[str]) -> dict[tuple[str, int], pa.Table]:
        """The index rows matching `expression` from covered files, as `columns`, per hour partition."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq


        if not self.covered:
            return {}
        if self.index_path is not None:
            file = pq.ParquetFile(self.index_filesystem.open_input_file(self.index_path), metadata=self.index_metadata)
            groups = list(range(file.metadata.num_row_groups))
            kept = self._kept(groups, [file.metadata.row_group(g).num_rows for g in groups])
            table = file.read_row_groups(kept) if kept else _schema().empty_table()  # columns in parallel
        else:
            assert self.index_table is not None
            pieces = [self.index_table.slice(start, ROW_GROUP_ROWS)
                      for start in range(0, self.index_table.num_rows, ROW_GROUP_ROWS)]
            kept = self._kept(list(range(len(pieces))), [piece.num_rows for piece in pieces])
            table = pa.concat_tables([pieces[g] for g in kept]) if kept else _schema().empty_table()
        table = table.filter(pc.is_in(table.column(FILE_COLUMN), pa.array(list(self.covered), pa.string())))
        if expression is not None:
            table = table.filter(expression)
        if not table.num_rows:
            return {}
        # One take for the day: rows ordered by (partition, ts), then each partition is a zero-copy slice.
        files = table.column(FILE_COLUMN).combine_chunks().dictionary_encode()
        partitions = [self.covered[name] for name in files.dictionary.to_pylist()]
        ordinal = {partition: number for number, partition in enumerate(sorted(set(partitions)))}
        keys = np.asarray([ordinal[partition] for partition in partitions], np.int64)[files.indices.to_numpy()]
        order = pc.sort_indices(pa.table({"partition": keys, "ts": table.column("ts")}),
                                sort_keys=[("partition", "ascending"), ("ts", "ascending")])
        sorted_keys = keys[order.to_numpy()]
        selected = conform(table.select(columns).take(order), columns)
        starts = np.flatnonzero(np.diff(sorted_keys, prepend=-1))
        ends = [*starts[1:], len(sorted_keys)]
        by_ordinal = {number: partition for partition, number in ordinal.items()}
        return {by_ordinal[int(sorted_keys[start])]: selected.slice(int(start), int(end - start))
                for start, end in zip(starts, ends, strict=True)}

    def _kept(self, groups: list[int], sizes: list[int]) -> list[int]:
        """Index row groups that may hold the literals (all of them when the bitmaps do not line up)."""
        bitmaps = self.index_bitmaps
        aligned = (bitmaps is not None and len(bitmaps) == len(groups)
                   and all(size == ROW_GROUP_ROWS for size in sizes[:-1]))
        if not aligned:
            return groups
        return [group for group in groups if text_index.may_contain(bitmaps[group], self.literals)]


def plan_day(source: ArchiveSource, date: str, files: list[DataFile], literals: list[bytes]) -> DayPlan:
    """The day's plan for a search whose pattern requires `literals` (`files`: that day's, selected)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    manifest, path, table = SEVERE_INDEX.fresh(source, date, files)
    footer = None
    try:
        footer = pq.read_metadata(path, filesystem=source.filesystem) if path is not None else None
        metadata = (footer.metadata if footer is not None else table.schema.metadata) or {}
    except (OSError, pa.ArrowInvalid):  # unreadable (another version's, or removed meanwhile): not used
        metadata, manifest = {}, {}
    try:
        plan = json.loads(metadata[PLAN_KEY])
    except (KeyError, ValueError):
        plan = {}
    others = text_index.decode({text_index.METADATA_KEY: metadata[OTHER_BITMAPS_KEY]}) \
        if OTHER_BITMAPS_KEY in metadata else None
    row_groups: dict[str, list[int] | None] = {}
    covered: dict[str, tuple[str, int]] = {}
    for data_file in files:
        name = relative(source, data_file.path)
        entry = plan.get(name)
        if manifest.get(name) != data_file.size or entry is None or others is None \
                or any(number >= len(others) for _, number in entry):
            row_groups[data_file.path] = None  # not covered, or no text index: search it whole
            continue
        covered[name] = data_file.partition
        row_groups[data_file.path] = [group for group, number in entry
                                      if text_index.may_contain(others[number], literals)]
    return DayPlan(row_groups, covered, path, source.filesystem, footer, table, text_index.decode(metadata), literals)


def plan_days(source: ArchiveSource, files: Iterable[DataFile], literals: list[bytes]) -> dict[str, DayPlan]:
    """Plans per day, or none at all when the index cannot be stored: held in memory for a process's
    life (a read-only root) it would cost ~10 MB per day."""
    by_date: dict[str, list[DataFile]] = {}
    for data_file in files:
        by_date.setdefault(data_file.date, []).append(data_file)
    if not by_date or SEVERE_INDEX.path(source, next(iter(by_date))) is None:
        return {}
    return {date: plan_day(source, date, day_files, literals) for date, day_files in by_date.items()}
