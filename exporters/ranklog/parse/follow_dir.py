"""Following a raw log directory: the records its files gain while they are written (``ranklog query
--log_dir DIR --follow``), parsed as :mod:`.directory` reads them.

Each :meth:`DirectoryFollower.poll` lists the directory again (new files join), reads what every file
gained since the last poll and parses it from where the last parse stopped (the pending record kept,
the parser state carried), so nothing is read or shown twice. A record that may still grow (a
traceback can follow it) is complete once the next record starts, or after :data:`IDLE_FINAL`
seconds without growth — the agent's rule (``idle_final``). A file that shrank was truncated and is
read again from its start, as is a path now holding another file (a new inode).

Identity: as :mod:`.directory` does for a whole folder, the rules of :mod:`ranklog.source_identity`
run over the observations of everything followed so far, and each poll's records are filled with
what they lend (a Ray worker's ``.out`` takes the rank its ``.err`` names, a torchrun rank file the
global rank its launcher's console pairs with its local rank). A record already shown keeps what it
was shown with: a value learned later reaches the records that come after it (``ranklog query`` on
the same folder shows it on all of them).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import pyarrow as pa

from ranklog.source_identity import LentTable, fill, lend, merge_observations, observation_schema, observe

from . import parse
from .contract import Detected, SourceContext
from .directory import CHUNK_BYTES, file_context, folder_options, list_log_files

IDLE_FINAL = 0.5


@dataclass
class _Cursor:
    """Where the parse of one file stands."""

    path: str
    detected: Detected
    inode: tuple[int, int]
    options: dict = field(default_factory=dict)  # the folder's source options (its zone)
    ctx: SourceContext | None = None
    offset: int = 0  # file offset of `carry`'s first byte: what the parser has consumed up to
    carry: bytes = b""  # read but not consumed yet (a pending record, a partial line)
    read_to: int = 0  # bytes of the file read so far
    grew_at: float = field(default_factory=time.monotonic)

    def advance(self, size: int, now: float) -> list[pa.RecordBatch]:
        out: list[pa.RecordBatch] = []
        if size > self.read_to:
            try:
                with open(self.path, "rb") as handle:
                    if self.ctx is None:
                        self.ctx = file_context(handle.fileno(), self.path, self.detected, self.options)
                        if self.ctx is None:
                            return out
                    handle.seek(self.read_to)
                    while self.read_to < size:
                        block = handle.read(min(CHUNK_BYTES, size - self.read_to))
                        if not block:
                            break
                        self.read_to += len(block)
                        out += self._parse(self.carry + block, final=False)
            except OSError:
                return out  # gone or unreadable since the listing: the next poll decides
            self.grew_at = now
        elif self.carry and self.ctx is not None and now - self.grew_at >= IDLE_FINAL:
            out += self._parse(self.carry, final=True)
        return out

    def _parse(self, data: bytes, final: bool) -> list[pa.RecordBatch]:
        assert self.ctx is not None
        result = parse(data, self.offset, self.ctx, final=final, read_time_ns=time.time_ns())
        self.offset += result.consumed
        self.carry = data[result.consumed:]
        return [result.batch] if result.batch.num_rows else []


class DirectoryFollower:
    """The records a raw log directory gains, poll after poll (the first poll: everything so far)."""

    def __init__(self, path: str, timezone: str | None = None) -> None:
        self.path = path
        self.options = folder_options(timezone)  # (`timezone`: of times printed without one)
        self._cursors: dict[str, _Cursor] = {}
        self._observed = observation_schema().empty_table()  # what the records so far say of their writers
        self._lent: LentTable | None = None

    def poll(self, now: float | None = None) -> list[pa.RecordBatch]:
        now = time.monotonic() if now is None else now
        out: list[pa.RecordBatch] = []
        listed = list_log_files(self.path)
        for file_path, detected, _ in listed:
            try:
                st = os.stat(file_path)
            except OSError:
                continue
            inode = (st.st_dev, st.st_ino)
            cursor = self._cursors.get(file_path)
            if cursor is None or cursor.inode != inode or st.st_size < cursor.read_to:
                cursor = self._cursors[file_path] = _Cursor(file_path, detected, inode, self.options)
            out += cursor.advance(st.st_size, now)
        present = {file_path for file_path, _, _ in listed}
        for gone in set(self._cursors) - present:
            del self._cursors[gone]
        return self._identified(out)

    def _identified(self, batches: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
        """`batches` filled with what every record followed so far lends. The rules run again only
        when a record brings a key not seen before (a new writer, a line naming its rank): a poll of
        known writers' lines costs one merge."""
        if not batches:
            return batches
        observed = merge_observations([self._observed, *(observe(batch) for batch in batches)])
        if self._lent is None or observed.num_rows != self._observed.num_rows:
            self._lent = lend(observed)
        self._observed = observed
        return [fill(batch, self._lent) for batch in batches]
