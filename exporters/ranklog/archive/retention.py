"""Retention: drop records older than their level's retention (default 30 d, per-level overrides).

Whole files go when their hour is past the longest retention; a file of an hour where only some
levels expired (e.g. DEBUG after 3 d) is rewritten without the expired rows through the same
journal transaction as compaction (or deleted when nothing remains). Row age is judged by `ts`, so
a file is never kept or dropped on its hour alone when levels differ. Only this instance's files are
touched (instances sharing a root each run their own retention, with the same config).
Query indexes (``_ranklog_index``, ranklog.query.day_index) copy records, so a day whose files
retention touched loses its index files too; the next query that needs the day rebuilds them from
what is left. Expired records therefore never outlive their retention in an index.
Metrics: files deleted or rewritten per level (`all` for whole files past every tier), the last
run time; `ranklog_archive_oldest_partition_timestamp_seconds` comes from the storage scan.
"""

from __future__ import annotations

import glob
import logging
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..archive_layout import index_glob, partition_dir
from ..record import LEVELS
from . import journal
from .archive_config import RetentionConfig
from .compaction import read_file
from .parquet_writer import COMPACTION_PAGE_BYTES, COMPACTION_ROW_GROUP_ROWS, COMPACTION_ZSTD_LEVEL, write_parquet
from .storage import Storage, StoredFile, temp_name

log = logging.getLogger("ranklog.archive.retention")


def _may_hold(storage: Storage, stored: StoredFile, levels: list[str]) -> bool:
    """False when the row-group statistics of `level` prove none of `levels` is in the file."""
    with storage.fs.open_input_file(stored.path) as source:
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
    with storage.fs.open_input_file(stored.path) as source:
        table = pq.read_table(source, columns=["level", "ts"])
    ts = pc.cast(table["ts"], pa.int64()).to_numpy()
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


def apply_retention(storage: Storage, state_dir: str, policy: RetentionConfig, now: float, metrics=None) -> int:
    """One retention pass; returns the number of files deleted or rewritten."""
    shortest = min([policy.default, *policy.levels.values()])
    changed = 0
    touched_days: set[str] = set()
    for stored in storage.list_files(own_only=True):
        hour_end = stored.hour_start + 3600
        if stored.hour_start >= now - shortest:
            continue  # nothing in this hour can have expired yet
        if hour_end <= now - policy.longest():
            touched_days.add(_day(stored))
            storage.delete(stored.path)
            _count(metrics, {"all"})
            changed += 1
            continue
        expired, levels = _expired_mask(storage, stored, policy, now)
        if not expired.any():
            continue
        touched_days.add(_day(stored))
        if expired.all():
            storage.delete(stored.path)
        else:
            kept = read_file(storage, stored.path).filter(pa.array(~expired))
            final = storage.new_file_path(int(stored.hour_start // 3600))
            temp = temp_name(final)
            write_parquet(storage, kept, temp, COMPACTION_ZSTD_LEVEL, COMPACTION_ROW_GROUP_ROWS,
                          COMPACTION_PAGE_BYTES)
            journal_path = os.path.join(state_dir, journal.REPLACE_JOURNAL)
            journal.commit(storage, journal_path, [(temp, final)], inputs=[stored.path])
            journal.finish(journal_path)
        _count(metrics, levels)
        changed += 1
        log.info("retention: %s lost %d expired row(s) of level(s) %s", stored.name, int(expired.sum()),
                 ",".join(sorted(levels)))
    _drop_day_indexes(storage, touched_days)
    storage.remove_empty_partitions()
    if metrics is not None:
        metrics.archive_retention_last_run_timestamp_seconds.set(now)
    return changed


def _day(stored: StoredFile) -> str:
    """The file's `date=YYYY-MM-DD` partition: how day indexes are named too."""
    return partition_dir(int(stored.hour_start // 3600)).split("/")[0]


def _drop_day_indexes(storage: Storage, days: set[str]) -> None:
    """Delete every query index file of `days` (indexes are only written under local roots)."""
    if storage.local_base is None:
        return
    for day in sorted(days):
        for path in glob.glob(index_glob(storage.local_base, day)):
            storage.delete(path)


def _count(metrics, levels: set) -> None:
    if metrics is not None:
        for level in levels:
            metrics.archive_retention_deleted_files.labels(level=level).inc()
