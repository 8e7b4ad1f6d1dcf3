"""Replacing files of an hour under its lease: the commit protocol compaction and retention share.

A replacement (N inputs → one output, or one file → the same minus expired rows) is:

1. write the output under a hidden name (storage.compaction_temp) and check its row count;
2. commit: write ``{output, temp, inputs, done: false}`` into the hour's lease (an If-Match write, so
   an archive that lost the hour cannot commit);
3. make the output visible (rename; on S3 a server-side copy, then delete of the temp);
4. delete the inputs;
5. mark the commit done in the lease.

A crash before 2 leaves a hidden orphan, dropped by the hour's next owner; after 2, the next owner
(this archive after a restart, from ``<state>/held_hours.json``, or another archive once the lease
expires) repeats 3–5, which are idempotent. Readers never count rows twice: between 3 and 4 the
lease's commit tells them the inputs are superseded (archive_layout.superseded).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..archive_layout import partition_dir
from .leases import HourLease, LeaseLost, LeaseStore
from .parquet_writer import write_parquet
from .storage import Storage, StoredFile, compaction_temp, write_atomic

log = logging.getLogger("ranklog.archive.replacement")
HELD_HOURS = "held_hours.json"


def _name(path: str) -> str:
    return path.rpartition("/")[2]


def _finish(storage: Storage, hour: int, commit: dict[str, Any]) -> None:
    """Steps 3 and 4 of the module docstring; safe to repeat."""
    directory = f"{storage.base}/{partition_dir(hour)}"
    temp = f"{directory}/{commit['temp']}"
    if commit.get("output") and storage.exists(temp):
        storage.rename(temp, f"{directory}/{commit['output']}")
    for name in commit.get("inputs") or ():
        storage.delete(f"{directory}/{name}")


def finish_commits(storage: Storage, lease: HourLease, hour: int) -> int:
    """Finish what a previous owner committed but did not complete; drop its uncommitted outputs."""
    commits = lease.commits
    pending = [commit for commit in commits if not commit.get("done")]
    for commit in pending:
        _finish(storage, hour, commit)
        commit["done"] = True
        log.warning("finished an interrupted replacement in %s: %s replaces %d file(s)", partition_dir(hour),
                    commit.get("output") or "nothing", len(commit.get("inputs") or ()))
    if pending:
        lease.write(commits=commits)
    for temp in storage.list_compaction_temps(hour):
        storage.delete(temp)
        log.warning("dropped an uncommitted replacement output %s", temp)
    return len(pending)


def replace(storage: Storage, lease: HourLease, hour: int, inputs: list[StoredFile], table: pa.Table | None,
            writer_options: dict[str, Any]) -> str | None:
    """Replace `inputs` (files of `hour`) by one file holding `table` (None or empty: by nothing);
    returns the output's path."""
    final = storage.new_file_path(hour)
    temp = compaction_temp(final)
    output = None
    if table is not None and table.num_rows:
        write_parquet(storage, table, temp, **writer_options)
        written = storage.row_count(temp)
        if written != table.num_rows:
            storage.delete(temp)
            raise OSError(f"replacement output {temp} holds {written} of {table.num_rows} rows; inputs kept")
        output = _name(final)
    commit = {"output": output, "temp": _name(temp), "inputs": [stored.name for stored in inputs], "done": False}
    lease.write(commits=[*lease.commits, commit])
    _finish(storage, hour, commit)
    commit["done"] = True
    lease.write(commits=[*lease.commits[:-1], commit])
    return final if output else None


@dataclass
class HourOwner:
    """Runs work on an hour while holding its lease, and remembers (in the state dir) which hours
    it holds, so a restart finishes its own interrupted commits before the archive says ready."""

    storage: Storage
    leases: LeaseStore
    ttl: float
    state_dir: str
    metrics: Any = None

    def _held_path(self) -> str:
        return os.path.join(self.state_dir, HELD_HOURS)

    def _held(self) -> list[int]:
        try:
            with open(self._held_path(), encoding="utf-8") as handle:
                return [int(hour) for hour in json.load(handle)]
        except (FileNotFoundError, ValueError, TypeError):
            return []

    def _set_held(self, hours: list[int]) -> None:
        write_atomic(self._held_path(), json.dumps(sorted(set(hours))).encode())

    def run(self, hour: int, work: Callable[[HourLease], None]) -> bool:
        """Take the hour's lease, finish earlier commits, run `work`, release. False when another
        archive holds the hour (it does the work) or took it over meanwhile."""
        lease = HourLease(self.leases, partition_dir(hour), self.storage.archive_id, self.ttl, self.metrics)
        if not lease.acquire():
            return False
        self._set_held([*self._held(), hour])
        try:
            finish_commits(self.storage, lease, hour)
            work(lease)
        except LeaseLost as exc:
            log.warning("%s; leaving the hour to its new owner", exc)
            return False
        finally:
            if lease.etag is not None:
                with contextlib.suppress(Exception):  # else it expires after ttl
                    lease.release()
            self._set_held([held for held in self._held() if held != hour])
        return True

    def recover(self) -> None:
        """Finish the hours this archive held when it stopped (at start, before ready)."""
        for hour in self._held():
            if not self.run(hour, lambda lease: None):
                self._set_held([held for held in self._held() if held != hour])
