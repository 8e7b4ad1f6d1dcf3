"""Per-day derived indexes of the archive, kept under ``<root>/_ranklog_index/<kind>/date=YYYY-MM-DD.rlindex``.

Shared by the trace index (:mod:`.trace_index`) and the severe-rows index (:mod:`.severe_index`): one
Parquet file per day, built from that day's data files and never trusted beyond them. Each index file
records the files (path and size) it covers; a query reads files the index does not cover directly,
and drops what it says about files that vanished, so an index is never stale, only incomplete. A
day's index is rebuilt when enough of it is uncovered (so the live day is re-indexed every few
flushes, not on every query).

The ``_`` directory keeps indexes out of pyarrow datasets, Spark, Trino and the archive's own
listing; the ``.rlindex`` suffix keeps them out of every ``*.parquet`` glob (DuckDB's ``**`` descends
into ``_`` and ``.`` directories, see :mod:`ranklog.archive_layout`). An index an older ranklog
wrote as ``date=….parquet`` is never read, and deleted when the day's new index is written (and by
the archive's retention pass). An index is written where the archive is: under a local root this process
may write (temp file + atomic rename), or as one object under an ``s3://`` root (a PUT appears whole);
where that is impossible (read-only directory, credentials that may not write) it is built in memory
and kept for the life of the process.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..archive_layout import DAY_NS, INDEX_SUFFIX, LEGACY_INDEX_SUFFIX, index_path

if TYPE_CHECKING:
    import pyarrow as pa

    from .sources import ArchiveSource, DataFile

MANIFEST_KEY = b"ranklog.index.files"
REBUILD_MIN_UNCOVERED_FILES = 4
REBUILD_UNCOVERED_FRACTION = 0.1

Build = Callable[["ArchiveSource", "list[DataFile]"], "pa.Table"]


def relative(source: ArchiveSource, path: str) -> str:
    """A data file's path relative to the archive root: how indexes name files."""
    return path[len(source.root):].lstrip("/")


def needs_rebuild(manifest: dict[str, int], current: dict[str, int]) -> bool:
    uncovered = [name for name, size in current.items() if manifest.get(name) != size]
    if not uncovered:
        return False
    uncovered_bytes = sum(current[name] for name in uncovered)
    return (len(uncovered) >= REBUILD_MIN_UNCOVERED_FILES
            or uncovered_bytes > REBUILD_UNCOVERED_FRACTION * max(1, sum(current.values()))
            or not manifest)


class DayIndex:
    """One kind of per-day index: `build` turns a day's data files into the index table (whose schema
    metadata may carry what the kind needs); this class stores, finds and refreshes it."""

    def __init__(self, kind: str, build: Build, row_group_rows: int, zstd_level: int | None = None) -> None:
        self.kind = kind
        self.build = build
        self.row_group_rows = row_group_rows
        self.zstd_level = zstd_level
        self._memory: dict[tuple[str, str], tuple[dict[str, int], pa.Table]] = {}
        self._lock = threading.Lock()
        self._unwritable: set[str] = set()  # object-store roots whose writes were refused

    def path(self, source: ArchiveSource, date: str) -> str | None:
        """Where the day's index lives, or None when it cannot be stored there: a local root this
        process may not write, or an object store that refused a write (read-only credentials)."""
        root = source.local_root
        if root is not None:
            return index_path(root, self.kind, date) if os.access(root, os.W_OK) else None
        if source.label in self._unwritable:
            return None
        return f"{source.root}/{index_path('', self.kind, date).lstrip('/')}"

    @staticmethod
    def manifest(metadata: dict[bytes, bytes] | None) -> dict[str, int] | None:
        try:
            return json.loads((metadata or {})[MANIFEST_KEY])
        except (KeyError, ValueError):
            return None

    def _load(self, source: ArchiveSource, path: str) -> dict[str, int] | None:
        import pyarrow.parquet as pq

        try:
            return self.manifest(pq.read_schema(path, filesystem=source.filesystem).metadata)
        except (OSError, ValueError):  # missing, damaged or not Parquet (pyarrow.ArrowInvalid): rebuilt over
            return None

    def _write(self, source: ArchiveSource, path: str, table: pa.Table) -> None:
        import pyarrow.parquet as pq

        options = {"row_group_size": self.row_group_rows, "compression": "zstd", "compression_level": self.zstd_level}
        if source.local_root is None:  # an object appears whole once its upload completes: no temp name
            try:
                pq.write_table(table, path, filesystem=source.filesystem, **options)
                source.filesystem.delete_file(_legacy(path))
            except FileNotFoundError:
                pass
            except OSError:
                self._unwritable.add(source.label)
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{os.getpid()}.{threading.get_ident()}")
        try:
            pq.write_table(table, temp, **options)
            os.replace(temp, path)
            if os.path.exists(_legacy(path)):
                os.unlink(_legacy(path))
        except OSError:
            if os.path.exists(temp):
                os.unlink(temp)

    def _rebuild(self, source: ArchiveSource, files: list[DataFile]) -> tuple[dict[str, int], pa.Table]:
        # Index the whole day, not just the hours this query selected, so the next query reuses it.
        start = files[0].start_ns - files[0].hour * 3600 * 1_000_000_000
        day_files = source.list_files(start, start + DAY_NS)
        manifest = {relative(source, f.path): f.size for f in day_files}
        table = self.build(source, day_files)
        metadata = dict(table.schema.metadata or {})
        metadata[MANIFEST_KEY] = json.dumps(manifest).encode()
        return manifest, table.replace_schema_metadata(metadata)

    def rebuilt(self, source: ArchiveSource, date: str, files: list[DataFile]) -> tuple[dict[str, int], None, pa.Table]:
        """The day's index built again now, stored where it lives (one another version wrote is unusable)."""
        manifest, table = self._rebuild(source, files)
        path = self.path(source, date)
        if path is not None:
            self._write(source, path, table)
        return manifest, None, table

    def fresh(self, source: ArchiveSource, date: str, files: list[DataFile]) -> tuple[dict[str, int], str | None,
                                                                                     pa.Table | None]:
        """The day's index, rebuilt first when too much of the day (`files`) is uncovered.

        Returns (manifest, index file path or None, in-memory index table or None).
        """
        current = {relative(source, f.path): f.size for f in files}
        path = self.path(source, date)
        if path is not None:
            manifest = self._load(source, path) or {}
            if not needs_rebuild(manifest, current):
                return manifest, path, None
            manifest, table = self._rebuild(source, files)
            self._write(source, path, table)
            return manifest, None, table
        key = (source.label, date)
        with self._lock:
            manifest, table = self._memory.get(key, ({}, None))
        if table is None or needs_rebuild(manifest, current):
            manifest, table = self._rebuild(source, files)
            with self._lock:
                self._memory[key] = (manifest, table)
        return manifest, None, table


def _legacy(path: str) -> str:
    """The name an older ranklog gave the same index (it matched `<root>/**/*.parquet`)."""
    return path.removesuffix(INDEX_SUFFIX) + LEGACY_INDEX_SUFFIX
