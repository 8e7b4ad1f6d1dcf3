"""Crash-safe file replacement: new Parquet files appear and old ones vanish all-or-nothing.

Every change to the archive's files is one transaction:

1. write the new files under temporary names (``.<name>.tmp``) and fsync them;
2. write the journal (JSON: temp → final names, inputs to delete, extra fields such as the WAL
   sequence a flush covers) atomically — this is the commit point;
3. rename the temp files to their final names, delete the inputs;
4. (replacements) remove the journal.

At start, :func:`recover` rolls every journal forward (the rename/delete steps are idempotent);
temp files that no journal names were never committed and are deleted. So a crash at any moment
loses nothing and never leaves both a merged file and its inputs visible.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from .storage import Storage, write_atomic

log = logging.getLogger("ranklog.archive.journal")
FLUSH_JOURNAL = "flush.json"  # kept after completion: it also records the flushed WAL sequence
REPLACE_JOURNAL = "replace.json"  # compaction and retention rewrites; removed when done


def read(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return None


def write(path: str, files: list[tuple[str, str]], inputs: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """Step 2 of the module docstring, the commit point: returns the record for :func:`apply`."""
    record = {"files": [list(pair) for pair in files], "inputs": list(inputs or []), **extra}
    write_atomic(path, json.dumps(record).encode())
    return record


def commit(storage: Storage, path: str, files: list[tuple[str, str]], inputs: list[str] | None = None,
           **extra: Any) -> None:
    """Make a prepared change durable and visible (steps 2 and 3 of the module docstring)."""
    apply(storage, write(path, files, inputs, **extra))


def apply(storage: Storage, record: dict[str, Any]) -> None:
    """Roll a committed journal forward; safe to repeat."""
    for temp, final in record.get("files", []):
        if storage.exists(temp):
            storage.make_parent(final)
            storage.rename(temp, final)
    for path in record.get("inputs", []):
        storage.delete(path)


def finish(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return


def recover(storage: Storage, state_dir: str) -> dict[str, Any] | None:
    """Finish interrupted transactions, drop uncommitted temp files; returns the flush journal."""
    flush = read(os.path.join(state_dir, FLUSH_JOURNAL))
    if flush is not None:
        apply(storage, flush)
    replace_path = os.path.join(state_dir, REPLACE_JOURNAL)
    replace = read(replace_path)
    if replace is not None:
        apply(storage, replace)
        finish(replace_path)
        log.warning("finished an interrupted file replacement (%d input(s))", len(replace.get("inputs", [])))
    for temp in storage.list_own_temps():
        storage.delete(temp)
        log.warning("dropped uncommitted temporary file %s", temp)
    return flush
