"""Compaction: once an hour has closed, merge this instance's small files into few large ones.

An hour is closed `compaction_delay` after it ends (late records from a lagging agent still land
as small files afterwards; the next pass merges them too). Candidates are every flush file of a
closed hour, whatever its size, and compaction outputs below half the target size; they are grouped
greedily so that each output stays near `compaction_target_size`, re-sorted (writer.SORT_KEYS) and
written with a higher zstd level. Flush files are unsorted zstd-1, about 1.6× the compacted size, so
even a group of one flush file (an hour one large flush covered, or a leftover after grouping) is
rewritten; compaction outputs carry a footer mark (writer.is_compacted) so they are never rewritten
alone. Only files of at least half the target size have their footer read to tell them apart. Each merge is one journal
transaction (see journal.py): write + fsync the output, commit, rename, delete the inputs — a
crash at any point leaves either the inputs or the output visible, never both, never neither.
Only files named with this instance's archive id are touched, so instances can share a root.
"""

from __future__ import annotations

import logging
import os
from collections import defaultdict
from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq

from ..record import arrow_schema
from . import journal
from .parquet_writer import (
    COMPACTION_PAGE_BYTES,
    COMPACTION_ROW_GROUP_ROWS,
    COMPACTION_ZSTD_LEVEL,
    is_compacted,
    sort_records,
    write_parquet,
)
from .storage import Storage, StoredFile, temp_name

log = logging.getLogger("ranklog.archive.compaction")
# Paths of compaction outputs already seen: an output never changes and its name is never reused, so
# each pass reads only the footers of files it has not classified yet.
_KNOWN_COMPACTED: set[str] = set()


def read_file(storage: Storage, path: str) -> pa.Table:
    with storage.fs.open_input_file(path) as source:
        return pq.read_table(source).cast(arrow_schema())


def row_count(storage: Storage, path: str) -> int:
    with storage.fs.open_input_file(path) as source:
        return pq.ParquetFile(source).metadata.num_rows


def plan(files: list[StoredFile], now: float, delay: float, target: int,
         compacted: Callable[[str], bool]) -> list[list[StoredFile]]:
    """Groups of candidate files of closed hours (small files, and large ones `compacted` says are
    flush files), each group ≈ `target` bytes or less (a group of one is merged only if that file is
    not a compaction output: see :func:`compact`)."""
    by_hour: dict[float, list[StoredFile]] = defaultdict(list)
    for stored in files:
        if stored.hour_start + 3600 + delay <= now and (stored.size < target // 2 or not compacted(stored.path)):
            by_hour[stored.hour_start].append(stored)
    groups: list[list[StoredFile]] = []
    for hour in sorted(by_hour):
        current: list[StoredFile] = []
        size = 0
        for stored in by_hour[hour]:
            if current and size + stored.size > target:
                groups.append(current)
                current, size = [], 0
            current.append(stored)
            size += stored.size
        groups.append(current)
    return [group for group in groups if group]


def merge(storage: Storage, state_dir: str, group: list[StoredFile]) -> str:
    """Replace `group` (one hour) by one sorted file; returns the new file's path."""
    table = sort_records(pa.concat_tables([read_file(storage, stored.path) for stored in group]))
    final = storage.new_file_path(int(group[0].hour_start // 3600))
    temp = temp_name(final)
    write_parquet(storage, table, temp, COMPACTION_ZSTD_LEVEL, COMPACTION_ROW_GROUP_ROWS, COMPACTION_PAGE_BYTES,
                  compacted=True)
    if row_count(storage, temp) != table.num_rows:
        storage.delete(temp)
        raise OSError(f"compaction output {temp} lost rows; inputs kept")
    journal_path = os.path.join(state_dir, journal.REPLACE_JOURNAL)
    journal.commit(storage, journal_path, [(temp, final)], inputs=[stored.path for stored in group])
    journal.finish(journal_path)
    return final


def compact(storage: Storage, state_dir: str, now: float, delay: float, target: int, metrics=None) -> int:
    """One compaction pass; returns the number of merges done."""
    merges = 0

    def compacted(path: str) -> bool:
        if path in _KNOWN_COMPACTED:
            return True
        if is_compacted(storage, path):
            _KNOWN_COMPACTED.add(path)
            return True
        return False

    for group in plan(storage.list_files(own_only=True), now, delay, target, compacted):
        if len(group) == 1 and compacted(group[0].path):
            continue
        output = merge(storage, state_dir, group)
        merges += 1
        if metrics is not None:
            metrics.archive_compactions.inc()
        log.info("compacted %d file(s) (%d bytes) into %s", len(group), sum(f.size for f in group), output)
    return merges
