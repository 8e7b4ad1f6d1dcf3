"""A Parquet file the archive cannot read is moved aside, not fatal.

An empty, random or half-copied ``.parquet`` in an hour's folder once made every read of its range
fail and compaction of that hour fail every period. Now:

- readers (ranklog.query) skip such files with a warning naming them (``ArchiveSource.list_files``);
- compaction and retention check each file of an hour before they plan (:func:`readable`: its size,
  first 4 and last 8 bytes, archive_layout.parquet_shape_problem), and a file that fails to read
  while they merge or rewrite it (:class:`Unreadable`) is taken out too; both are *moved aside* to
  ``<root>/_ranklog/quarantine/<date=…/hour=…/name>.unreadable`` (under the hour's lease; no
  ``*.parquet`` glob matches it) and the work goes on with the rest;
- ``ranklog_archive_unreadable_files`` counts what is unreadable in place or moved aside (the
  storage scan, every 10 s); ``ranklog integrity`` lists both and fails until an operator removes
  the quarantined file (its records are lost unless it can be repaired by hand).

On an object store only the size is judged before reading (objects are written whole); damage
inside a file shows when compaction reads it.
"""

from __future__ import annotations

import logging
import os

import pyarrow.fs as pafs

from ..archive_layout import QUARANTINE_DIR, QUARANTINE_SUFFIX, parquet_shape_problem
from .storage import Storage, StoredFile

log = logging.getLogger("ranklog.archive.quarantine")
_CHECKED: dict[tuple[str, int], str | None] = {}  # (path, size) → problem: visible files never change


class Unreadable(Exception):
    """A stored file that could not be read as Parquet."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path, self.why = path, why


def problem(storage: Storage, stored: StoredFile) -> str | None:
    """Why `stored` cannot be a Parquet file (None when it may be)."""
    key = (stored.path, stored.size)
    if key in _CHECKED:
        return _CHECKED[key]
    if stored.size < 12 or storage.local_base is None:
        found = parquet_shape_problem(stored.size, b"PAR1", b"\0\0\0\0PAR1") if stored.size < 12 else None
    else:
        try:
            fd = os.open(stored.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return None  # gone meanwhile
        try:
            found = parquet_shape_problem(stored.size, os.pread(fd, 4, 0), os.pread(fd, 8, max(0, stored.size - 8)))
        finally:
            os.close(fd)
    if len(_CHECKED) > 200_000:
        _CHECKED.clear()
    _CHECKED[key] = found
    return found


def move_aside(storage: Storage, path: str, why: str) -> str:
    """Move an unreadable file to the quarantine (call under its hour's lease); returns where it went."""
    relative = path[len(storage.base):].lstrip("/")
    target = f"{storage.base}/{QUARANTINE_DIR}/{relative}{QUARANTINE_SUFFIX}"
    storage.make_parent(target)
    storage.rename(path, target)
    log.error("moved unreadable Parquet file %s to %s (%s): its records cannot be read; `ranklog integrity` "
              "reports it until it is removed", path, target, why)
    return target


def readable(storage: Storage, files: list[StoredFile]) -> list[StoredFile]:
    """`files` without the ones that cannot be Parquet, which are moved aside (under the hour's lease)."""
    out = []
    for stored in files:
        found = problem(storage, stored)
        if found is None:
            out.append(stored)
        else:
            move_aside(storage, stored.path, found)
    return out


def opening(path: str):
    """Turn a read failure of `path` into :class:`Unreadable` (a context manager)."""
    return _Opening(path)


class _Opening:
    def __init__(self, path: str) -> None:
        self.path = path

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, trace) -> bool:
        import pyarrow as pa

        if exc is not None and isinstance(exc, (OSError, pa.ArrowException)) and not isinstance(exc, FileNotFoundError):
            raise Unreadable(self.path, str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        return False


def quarantined(storage: Storage) -> int:
    selector = pafs.FileSelector(f"{storage.base}/{QUARANTINE_DIR}", recursive=True, allow_not_found=True)
    return sum(1 for info in storage.fs.get_file_info(selector) if info.type == pafs.FileType.File)


def unreadable_in_place(storage: Storage, files: list[StoredFile]) -> list[StoredFile]:
    return [stored for stored in files if problem(storage, stored) is not None]
