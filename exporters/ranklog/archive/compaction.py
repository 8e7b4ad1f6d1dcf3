"""Compaction: once an hour has closed, merge its small files into few large ones.

An hour is closed `compaction_delay` after it ends (late records from a lagging agent still land
as small files afterwards; the next pass merges them too). Candidates are every flush file of a
closed hour, whatever its size, and compaction outputs below half the target size; they are grouped
greedily so that each output stays near `compaction_target_size`, re-sorted (writer.SORT_KEYS) and
written with a higher zstd level. Flush files are unsorted zstd-1, about 1.6× the compacted size, so
even a group of one flush file (an hour one large flush covered, or a leftover after grouping) is
rewritten; compaction outputs carry a footer mark (writer.is_compacted) so they are never rewritten
alone. Only files of at least half the target size have their footer read to tell them apart.

Archives sharing a root (a directory or one bucket) merge each other's files: an hour is compacted
by whichever archive holds its lease (archive.leases), and each merge is one commit of
archive.replacement — a crash or a takeover at any point leaves the rows visible exactly once.
Hours whose listing shows a commit left half done (inputs superseded but not deleted) are taken up
whatever their age, so a dead owner's work is finished by the next pass of any archive.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq

from ..conform import conform
from .parquet_writer import (
    COMPACTION_PAGE_BYTES,
    COMPACTION_ROW_GROUP_ROWS,
    COMPACTION_ZSTD_LEVEL,
    is_compacted,
    sort_records,
)
from .quarantine import Unreadable, move_aside, opening, readable
from .replacement import HourOwner, replace
from .storage import Storage, StoredFile

log = logging.getLogger("ranklog.archive.compaction")
# Paths of compaction outputs already seen: an output never changes and its name is never reused, so
# each pass reads only the footers of files it has not classified yet.
_KNOWN_COMPACTED: set[str] = set()
MAX_UNREADABLE = 32  # files of one hour moved aside in one pass


def read_file(storage: Storage, path: str) -> pa.Table:
    """A stored file's records; :class:`.quarantine.Unreadable` when it is not readable Parquet."""
    with opening(path), storage.fs.open_input_file(path) as source:
        return conform(pq.read_table(source))  # files of an older archive may hold ts in ns


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


COMPACTION_OPTIONS = {"zstd_level": COMPACTION_ZSTD_LEVEL, "row_group_rows": COMPACTION_ROW_GROUP_ROWS,
                      "page_bytes": COMPACTION_PAGE_BYTES, "compacted": True}


def merge(storage: Storage, lease, group: list[StoredFile]) -> str:
    """Replace `group` (one hour) by one sorted file; returns the new file's path."""
    table = sort_records(pa.concat_tables([read_file(storage, stored.path) for stored in group]))
    output = replace(storage, lease, int(group[0].hour_start // 3600), group, table, COMPACTION_OPTIONS)
    assert output is not None
    return output


def compact(storage: Storage, owner: HourOwner, now: float, delay: float, target: int, metrics=None) -> int:
    """One compaction pass over every archive's files; returns the number of merges this archive did."""
    merges = 0

    def compacted(path: str) -> bool:
        if path in _KNOWN_COMPACTED:
            return True
        if is_compacted(storage, path):
            _KNOWN_COMPACTED.add(path)
            return True
        return False

    def work_on(hour: int):
        def work(lease) -> None:
            nonlocal merges
            # Planned again under the lease: another archive may have compacted the hour meanwhile; a
            # file that is not readable is moved aside (quarantine) and the hour planned again without it.
            for _ in range(MAX_UNREADABLE):
                files = readable(storage, storage.list_files(own_only=False, hour_index=hour))
                try:
                    for group in plan(files, now, delay, target, compacted):
                        if len(group) == 1 and compacted(group[0].path):
                            continue
                        output = merge(storage, lease, group)
                        merges += 1
                        if metrics is not None:
                            metrics.archive_compactions.inc()
                        log.info("compacted %d file(s) (%d bytes) into %s", len(group), sum(f.size for f in group),
                                 output)
                    return
                except Unreadable as exc:
                    move_aside(storage, exc.path, exc.why)
        return work

    unfinished: set[int] = set()
    files = storage.list_files(own_only=False, unfinished=unfinished)
    hours = {int(group[0].hour_start // 3600) for group in plan(files, now, delay, target, compacted)
             if len(group) > 1 or not compacted(group[0].path)}
    for hour in sorted(hours | unfinished):
        owner.run(hour, work_on(hour))
    return merges
