"""Where Parquet files live: a pyarrow filesystem, the hive layout, file naming, disk space, the clock.

All file operations go through ``pyarrow.fs`` (the root opened by :mod:`ranklog.object_store`), so a
local directory is the default and object storage (``s3://bucket/prefix``) is a config change. On a
local filesystem files and directory entries are fsynced, so a renamed file survives power loss;
object stores make a finished PUT durable on their own, and an object appears whole or not at all
(a multipart upload becomes visible only when it completes), so readers never see a partial file.

Layout: ``<root>/date=YYYY-MM-DD/hour=HH/<archive-id>-<seq>.parquet`` (UTC hour of `ts`). `seq` is
microseconds since the epoch at creation, made strictly increasing within a process, so names
sort by age and never collide within an instance. Temporary files are written next to their final
name as ``.<name>.tmp``: pyarrow.dataset ignores dot-files and ``*.parquet`` globs (DuckDB, Spark)
do not match them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
from dataclasses import dataclass

import pyarrow.fs as pafs

from ..archive_layout import LEASE_NAME, partition_dir, partition_start, superseded
from ..object_store import S3Settings, is_uri, open_root


@dataclass(frozen=True)
class StoredFile:
    path: str  # filesystem path (no scheme)
    size: int
    hour_start: float  # epoch seconds of the partition's hour

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def temp_name(final_path: str) -> str:
    directory, _, name = final_path.rpartition("/")
    return f"{directory}/.{name}.tmp"


COMPACTION_TEMP_PREFIX = ".replace."


def compaction_temp(final_path: str) -> str:
    """Hidden name of a compaction/retention output until its commit: distinct from flush temps, which
    belong to the archive that writes them (the hour's owner may drop uncommitted ones of its hour)."""
    directory, _, name = final_path.rpartition("/")
    return f"{directory}/{COMPACTION_TEMP_PREFIX}{name}.tmp"


class Storage:
    """The archive root seen through pyarrow.fs, with this instance's naming rules."""

    def __init__(self, root: str, archive_id: str, s3: S3Settings | None = None) -> None:
        self.fs, self.base = open_root(root, s3)
        self.local_base: str | None = None if is_uri(root) else self.base
        if self.local_base is not None:
            os.makedirs(self.base, exist_ok=True)
        self.archive_id = archive_id
        self._own = re.compile(rf"^{re.escape(archive_id)}-(\d+)\.parquet$")
        self._own_temp = re.compile(rf"^\.{re.escape(archive_id)}-(\d+)\.parquet\.tmp$")
        self._seq_lock = threading.Lock()
        self._last_seq = 0

    # --- naming --------------------------------------------------------------------------------
    def next_seq(self) -> int:
        with self._seq_lock:
            self._last_seq = max(self._last_seq + 1, time.time_ns() // 1000)
            return self._last_seq

    def new_file_path(self, hour_index: int) -> str:
        return f"{self.base}/{partition_dir(hour_index)}/{self.archive_id}-{self.next_seq()}.parquet"

    def is_own(self, name: str) -> bool:
        return bool(self._own.match(name))

    def is_own_temp(self, name: str) -> bool:
        return bool(self._own_temp.match(name))

    # --- listing -------------------------------------------------------------------------------
    def list_files(self, own_only: bool = True, hour_index: int | None = None,
                   unfinished: set[int] | None = None) -> list[StoredFile]:
        """Parquet files in hive partitions (this instance's, or everyone's; one hour, or all), without
        the inputs of replacements already committed in an hour's lease (archive_layout.superseded);
        hours where such inputs are still present are added to `unfinished`."""
        base = self.base if hour_index is None else f"{self.base}/{partition_dir(hour_index)}"
        selector = pafs.FileSelector(base, recursive=True, allow_not_found=True)
        by_dir: dict[str, list[pafs.FileInfo]] = {}
        leases: set[str] = set()
        for info in self.fs.get_file_info(selector):
            if info.type != pafs.FileType.File:
                continue
            directory, _, name = info.path.rpartition("/")
            if name == LEASE_NAME:
                leases.add(directory)
            elif name.endswith(".parquet") and not name.startswith((".", "_")):
                by_dir.setdefault(directory, []).append(info)
        out = []
        for directory, infos in by_dir.items():
            start = partition_start(directory)
            if start is None:
                continue
            hidden = self._superseded(directory, infos) if directory in leases and len(infos) > 1 else set()
            hidden &= {info.base_name for info in infos}
            if hidden and unfinished is not None:
                unfinished.add(int(start // 3600))
            out.extend(StoredFile(info.path, info.size or 0, start) for info in infos
                       if info.base_name not in hidden and (not own_only or self.is_own(info.base_name)))
        return sorted(out, key=lambda f: (f.hour_start, f.name))

    def _superseded(self, directory: str, infos: list[pafs.FileInfo]) -> set[str]:
        try:
            with self.fs.open_input_stream(f"{directory}/{LEASE_NAME}") as stream:
                lease = json.loads(stream.read())
        except (FileNotFoundError, ValueError):
            return set()
        return superseded(lease if isinstance(lease, dict) else {}, {info.base_name for info in infos})

    def list_compaction_temps(self, hour_index: int) -> list[str]:
        """Hidden outputs of replacements in one hour (compaction_temp names), committed or not."""
        selector = pafs.FileSelector(f"{self.base}/{partition_dir(hour_index)}", allow_not_found=True)
        return [info.path for info in self.fs.get_file_info(selector)
                if info.type == pafs.FileType.File and info.base_name.startswith(COMPACTION_TEMP_PREFIX)]

    def list_own_temps(self) -> list[str]:
        selector = pafs.FileSelector(self.base, recursive=True, allow_not_found=True)
        return [info.path for info in self.fs.get_file_info(selector)
                if info.type == pafs.FileType.File and self.is_own_temp(info.path.rpartition("/")[2])]

    def row_count(self, path: str) -> int:
        import pyarrow.parquet as pq

        with self.fs.open_input_file(path) as source:
            return pq.ParquetFile(source).metadata.num_rows

    def exists(self, path: str) -> bool:
        return self.fs.get_file_info(path).type == pafs.FileType.File

    # --- durable file operations ---------------------------------------------------------------
    def make_parent(self, path: str) -> None:
        self.fs.create_dir(path.rpartition("/")[0], recursive=True)

    def sync_file(self, path: str) -> None:
        if self.local_base is not None:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def sync_dir(self, path: str) -> None:
        if self.local_base is not None:
            sync_directory(path)

    def rename(self, source: str, target: str) -> None:
        self.fs.move(source, target)
        self.sync_dir(target.rpartition("/")[0])

    def delete(self, path: str) -> None:
        try:
            self.fs.delete_file(path)
        except FileNotFoundError:
            return
        self.sync_dir(path.rpartition("/")[0])

    def remove_empty_partitions(self) -> None:
        """Drop `hour=`/`date=` directories left empty by retention (local roots only)."""
        if self.local_base is None:
            return
        for dirpath, dirnames, filenames in os.walk(self.local_base, topdown=False):
            if dirpath != self.local_base and not dirnames and not filenames and "=" in os.path.basename(dirpath):
                try:
                    os.rmdir(dirpath)
                except OSError:
                    continue


def sync_directory(path: str) -> None:
    """fsync a directory so a rename or unlink inside it is durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str, data: bytes) -> None:
    """Replace a local file atomically and durably (temp + fsync + rename + directory fsync)."""
    temp = f"{path}.tmp"
    with open(temp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)
    sync_directory(os.path.dirname(path) or ".")


class DiskProbe:
    """Free bytes where the archive writes: statvfs, or a number read from `override_file` (tests)."""

    def __init__(self, path: str | None, override_file: str = "", cache_seconds: float = 1.0) -> None:
        self.path = path
        self.override_file = override_file
        self.cache_seconds = cache_seconds
        self._cached: tuple[float, int | None] = (-1e9, None)

    def free_bytes(self) -> int | None:
        now = time.monotonic()
        if now - self._cached[0] < self.cache_seconds:
            return self._cached[1]
        value: int | None
        if self.override_file:
            try:
                with open(self.override_file) as handle:
                    value = int(float(handle.read().strip()))
            except (OSError, ValueError):
                value = None
        elif self.path is not None:
            value = shutil.disk_usage(self.path).free
        else:
            value = None  # object storage: no meaningful free-space figure
        self._cached = (now, value)
        return value


class Clock:
    """Wall-clock seconds, or the number in `override_file` (tests inject time for retention)."""

    def __init__(self, override_file: str = "") -> None:
        self.override_file = override_file

    def now(self) -> float:
        if self.override_file:
            try:
                with open(self.override_file) as handle:
                    return float(handle.read().strip())
            except (OSError, ValueError):
                return time.time()
        return time.time()
