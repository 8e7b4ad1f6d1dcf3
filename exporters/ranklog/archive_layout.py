"""The archive's on-disk contract, shared by the archive (which writes it) and query (which reads it).

Layout: ``<root>/date=YYYY-MM-DD/hour=HH/<archive-id>-<seq>.parquet``, the hour being the UTC hour of
`ts`. Derived indexes (built by query, dropped by archive retention when a day changes) live under
``<root>/<INDEX_ROOT>/<kind>/date=YYYY-MM-DD<INDEX_SUFFIX>``: Parquet inside, but no name that ends in
``.parquet``, because DuckDB's globs (``<root>/**/*.parquet``, ``*/*/*.parquet``) skip neither ``_``
nor ``.`` directories (checked with DuckDB 2.0) and one index file among the data makes
``read_parquet(…, hive_partitioning=true)`` fail ("Hive partition mismatch"); the ``_`` directory
keeps them out of pyarrow datasets, Spark and Trino, which skip ``_``/``.`` names. Compaction gives the rows of
:data:`SEVERE_LEVELS` row groups of their own and marks its files with :data:`COMPACTED_KEY` in the
Parquet footer (the text skip index's key is :data:`ranklog.text_index.METADATA_KEY`).

This module imports nothing of ranklog but :mod:`ranklog.record`, and no third-party package: both
sides import it, so neither needs the other's internals.
"""

from __future__ import annotations

import os
import re
from datetime import datetime, timezone

from .record import levels_at_least

HOUR_NS = 3600 * 1_000_000_000
DAY_NS = 24 * HOUR_NS
DATE_DIR = re.compile(r"^date=(\d{4}-\d{2}-\d{2})$")
HOUR_DIR = re.compile(r"^hour=(\d{1,2})$")
_PARTITION = re.compile(r"date=(\d{4}-\d{2}-\d{2})/hour=(\d{2})$")

# Where query keeps its per-day derived indexes, relative to the archive root.
INDEX_ROOT = "_ranklog_index"
INDEX_SUFFIX = ".rlindex"
# The archive's source → identity map (ranklog.archive.identity_map), read by every reader
# (ranklog.source_identity.read_map): `<root>/<IDENTITY_DIR>/<archive-id>-<seq><IDENTITY_SUFFIX>`.
IDENTITY_DIR = f"{INDEX_ROOT}/identity"
IDENTITY_SUFFIX = ".rlidentity"
# What indexes were called before (they matched `**/*.parquet`): never read, deleted by the archive.
LEGACY_INDEX_SUFFIX = ".parquet"
# Per-hour ownership record of compaction/retention, in the hour's directory (archive.leases). Its
# `commits` name replacements: once a commit's `output` file exists, its `inputs` are superseded.
LEASE_NAME = "_ranklog_lease.json"
# Compaction puts the rows of these levels first, in row groups of their own (archive.parquet_writer).
SEVERE_LEVELS: tuple[str, ...] = tuple(levels_at_least("ERROR"))
# Footer key-value metadata of a file written by compaction (value b"1").
COMPACTED_KEY = b"ranklog.compacted"
# attrs keys of the loss notice an archive stores when WAL damage lost acknowledged entries
# (archive.wal_damage); `ranklog integrity` reports and fails on them.
WAL_LOST_ENTRIES, WAL_LOST_RECORDS, WAL_LOST_BYTES = "ranklog_wal_lost_entries", "ranklog_wal_lost_records", \
    "ranklog_wal_lost_bytes"
WAL_NOTICE_PREFIX = "ranklog-archive:"  # their source_id: `ranklog-archive:<archive id>:wal`, offset the first lost seq


# Where the archive moves a Parquet file it cannot read (relative to the root; the hour's path kept below
# it, and ".unreadable" appended so that no `*.parquet` glob matches it). Readers skip unreadable files
# with a warning naming them; `ranklog integrity` reports both kinds as damage.
QUARANTINE_DIR = "_ranklog/quarantine"
QUARANTINE_SUFFIX = ".unreadable"
PARQUET_MAGIC = b"PAR1"


def parquet_shape_problem(size: int, head: bytes, tail: bytes) -> str | None:
    """Why a file cannot be Parquet, from its size, first 4 and last 8 bytes; None when it may be."""
    if size < 12:
        return f"{size} bytes: too short to be a Parquet file"
    if head[:4] != PARQUET_MAGIC:
        return "no Parquet magic at its start: not a Parquet file"
    if tail[-4:] != PARQUET_MAGIC:
        return "no Parquet footer at its end: truncated (a copy cut short) or not a Parquet file"
    if int.from_bytes(tail[-8:-4], "little") + 12 > size:
        return "its footer claims more bytes than the file has"
    return None


def partition_dir(hour_index: int) -> str:
    """`date=YYYY-MM-DD/hour=HH` for an hour counted since the epoch."""
    moment = datetime.fromtimestamp(hour_index * 3600, tz=timezone.utc)
    return moment.strftime("date=%Y-%m-%d/hour=%H")


def partition_start(directory: str) -> float | None:
    """Epoch seconds of the hour a `…/date=…/hour=…` directory holds, or None."""
    match = _PARTITION.search(directory.rstrip("/"))
    if not match:
        return None
    moment = datetime.strptime(f"{match.group(1)} {match.group(2)}", "%Y-%m-%d %H").replace(tzinfo=timezone.utc)
    return moment.timestamp()


def hour_start_ns(date: str, hour: int) -> int:
    """Nanoseconds since the epoch at the start of `hour` (0-23) of `date` (YYYY-MM-DD, UTC)."""
    day = datetime.strptime(date, "%Y-%m-%d").replace(tzinfo=timezone.utc)
    return int(day.timestamp()) * 1_000_000_000 + hour * HOUR_NS


def index_path(root: str, kind: str, date: str) -> str:
    """Where the derived index of `kind` for `date` (YYYY-MM-DD) lives under a local archive root."""
    return os.path.join(root, INDEX_ROOT, kind, f"date={date}{INDEX_SUFFIX}")


def superseded(lease: dict, present: set[str]) -> set[str]:
    """File names of one hour that readers must ignore: the inputs of every committed replacement
    (compaction or a retention rewrite) whose output is already in `present` (the hour's listing).

    A replacement writes its output under a hidden name, commits it in the hour's lease, makes the
    output visible, then deletes the inputs; between the last two steps both exist, and this is what
    keeps a reader (query, the archive's own listing) from counting the rows twice."""
    hidden: set[str] = set()
    for commit in lease.get("commits") or ():
        if isinstance(commit, dict) and commit.get("output") in present:
            hidden.update(name for name in commit.get("inputs") or () if isinstance(name, str))
    return hidden
