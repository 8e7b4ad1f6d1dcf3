"""Retention: drop records older than their level's retention (default 30 d, per-level overrides).

Whole files go when their hour is past the longest retention; a file of an hour where only some
levels expired (e.g. DEBUG after 3 d) is rewritten without the expired rows through the same
journal transaction as compaction (or deleted when nothing remains). Row age is judged by `ts`, so
a file is never kept or dropped on its hour alone when levels differ. Only this instance's files are
touched by the archive holding the hour's lease (archive.leases; archives sharing a root must share
the retention config), each rewrite being one commit of archive.replacement.
Query indexes (``_ranklog_index``, ranklog.query.day_index) copy records, so a day whose files
retention touched loses its index files too; the next query that needs the day rebuilds them from
what is left. Expired records therefore never outlive their retention in an index.
Metrics: files deleted or rewritten per level (`all` for whole files past every tier), the last
run time; `ranklog_archive_oldest_partition_timestamp_seconds` comes from the storage scan.
"""

from __future__ import annotations

import logging

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..archive_layout import INDEX_ROOT, INDEX_SUFFIX, LEGACY_INDEX_SUFFIX, partition_dir
from ..record import LEVELS, ts_ns
from .archive_config import RetentionConfig
from .compaction import read_file
from .parquet_writer import COMPACTION_PAGE_BYTES, COMPACTION_ROW_GROUP_ROWS, COMPACTION_ZSTD_LEVEL
from .quarantine import Unreadable, move_aside, opening, readable
from .replacement import HourOwner, replace
from .storage import Storage, StoredFile

log = logging.getLogger("ranklog.archive.retention")
RETENTION_OPTIONS = {"zstd_level": COMPACTION_ZSTD_LEVEL, "row_group_rows": COMPACTION_ROW_GROUP_ROWS,
                     "page_bytes": COMPACTION_PAGE_BYTES}


def _may_hold(storage: Storage, stored: StoredFile, levels: list[str]) -> bool:
    """False when the row-group statistics of `level` prove none of `levels` is in the file."""
    with opening(stored.path), storage.fs.open_input_file(stored.path) as source:
        meta = pq.ParquetFile(source).metadata
    column = meta.schema.names.index("level")
    for group in range(meta.num_row_groups):
        stats = meta.row_group(group).column(column).statistics
        if stats is None or not stats.has_min_max or any(stats.min <= name <= stats.max for name in levels):
            return True
    return False


def _expired_mask(storage: Storage, stored: StoredFile, policy: RetentionConfig, now: float) -> tuple[np.ndarray, set]:
    candidates = [name for name in LEVELS if now - policy.keep_for(name) > stored.hour_start]
    if not candidates or not _may_hold(storage, stored, candidates):
        return np.zeros(0, dtype=bool), set()
    with opening(stored.path), storage.fs.open_input_file(stored.path) as source:
        table = pq.read_table(source, columns=["level", "ts"])
    ts = ts_ns(table["ts"])
    level = table["level"].to_numpy(zero_copy_only=False)
    expired = np.zeros(table.num_rows, dtype=bool)
    levels: set[str] = set()
    for name in LEVELS:
        cutoff_ns = int((now - policy.keep_for(name)) * 1e9)
        hit = (level == name) & (ts < cutoff_ns)
        if hit.any():
            levels.add(name)
            expired |= hit
    return expired, levels


def _due(storage: Storage, stored: StoredFile, policy: RetentionConfig, now: float) -> bool:
    """Whether `stored` may hold expired rows (footer statistics only, no rows read)."""
    if stored.hour_start >= now - min([policy.default, *policy.levels.values()]):
        return False  # nothing in this hour can have expired yet
    if stored.hour_start + 3600 <= now - policy.longest():
        return True
    candidates = [name for name in LEVELS if now - policy.keep_for(name) > stored.hour_start]
    try:
        return bool(candidates) and _may_hold(storage, stored, candidates)
    except Unreadable:
        return True  # its hour's pass (under the lease) moves it aside


def _expire(storage: Storage, lease, stored: StoredFile, policy: RetentionConfig, now: float, metrics) -> bool:
    """Drop the expired rows of one file (under its hour's lease); True when the file changed."""
    hour = int(stored.hour_start // 3600)
    if stored.hour_start + 3600 <= now - policy.longest():
        expired, levels = np.ones(1, dtype=bool), {"all"}
    else:
        expired, levels = _expired_mask(storage, stored, policy, now)
    if not expired.any():
        return False
    if expired.all():
        storage.delete(stored.path)
    else:
        kept = read_file(storage, stored.path).filter(pa.array(~expired))
        replace(storage, lease, hour, [stored], kept, RETENTION_OPTIONS)
    _count(metrics, levels)
    log.info("retention: %s lost %s expired row(s) of level(s) %s", stored.name,
             "all" if "all" in levels else int(expired.sum()), ",".join(sorted(levels)))
    return True


def apply_retention(storage: Storage, owner: HourOwner, policy: RetentionConfig, now: float, metrics=None) -> int:
    """One retention pass over every archive's files; returns the number of files this archive
    deleted or rewritten."""
    changed = 0
    touched_days: set[str] = set()
    hours = sorted({int(f.hour_start // 3600) for f in storage.list_files(own_only=False)
                    if _due(storage, f, policy, now)})
    for hour in hours:
        def work(lease, hour: int = hour) -> None:
            nonlocal changed
            for stored in readable(storage, storage.list_files(own_only=False, hour_index=hour)):
                try:
                    if _expire(storage, lease, stored, policy, now, metrics):
                        changed += 1
                        touched_days.add(_day(stored))
                except Unreadable as exc:
                    move_aside(storage, exc.path, exc.why)
        owner.run(hour, work)
    _drop_day_indexes(storage, touched_days)
    storage.remove_empty_partitions()
    if metrics is not None:
        metrics.archive_retention_last_run_timestamp_seconds.set(now)
    return changed


def _day(stored: StoredFile) -> str:
    """The file's `date=YYYY-MM-DD` partition: how day indexes are named too."""
    return partition_dir(int(stored.hour_start // 3600)).split("/")[0]


def _drop_day_indexes(storage: Storage, days: set[str] | None) -> None:
    """Delete the query index files of `days` (`<root>/_ranklog_index/<kind>/date=…`), and every
    index an older ranklog named `….parquet` (they broke DuckDB's `**/*.parquet`; `days` None: only those)."""
    import pyarrow.fs as pafs

    selector = pafs.FileSelector(f"{storage.base}/{INDEX_ROOT}", recursive=True, allow_not_found=True)
    names = {f"{day}{INDEX_SUFFIX}" for day in days or ()}
    for info in storage.fs.get_file_info(selector):
        if info.type == pafs.FileType.File and (info.base_name in names or info.base_name.endswith(LEGACY_INDEX_SUFFIX)):
            storage.delete(info.path)
            if info.base_name.endswith(LEGACY_INDEX_SUFFIX):
                log.info("deleted %s: a query index of an older ranklog (indexes no longer end in .parquet)", info.path)


def _count(metrics, levels: set) -> None:
    if metrics is not None:
        for level in levels:
            metrics.archive_retention_deleted_files.labels(level=level).inc()
