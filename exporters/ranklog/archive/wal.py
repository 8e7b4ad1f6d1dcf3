"""The write-ahead log: request bodies appended as they arrived, fsynced before the ACK.

Entries hold the raw body bytes (still gzip/zstd/Arrow-compressed as sent — nothing is
re-encoded on the hot path) with the content type, encoding and receive time needed to decode them
again. Layout: ``<state>/wal/<first-seq, 20 digits>.wal`` segments of entries::

    magic "RLW1" | seq u64 | received_ns i64 | length u64 | content type u8 | encoding u8 | pad u16 |
    crc32 u32 (of the 32 header bytes before it and the body) | body

An entry written for a token bound to a node identity (:mod:`.auth`) has magic "RLW2", the
identity's UTF-8 length in the u16 and the identity right before the body (``length`` and the crc
cover both), so replay rebuilds the same identity-namespaced dedup keys. "RLW1" entries (no
identity: a shared token, or written before identities existed) stay readable.

Group commit: appends only `write()`; a caller that needs durability calls :meth:`Wal.sync_to`. The
first waiter becomes the leader, fdatasyncs everything written so far and wakes every waiter its
sync covered; the others wait. So N concurrent requests cost one fsync, not N.

Replay verifies every entry; at the first torn or corrupt entry the segment is cut there (the
bytes after it were never acknowledged: an ACK waits for the fsync of its entry, and entries are
written in order) and replay continues with the next segment.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise

from .storage import sync_directory

log = logging.getLogger("ranklog.archive.wal")

_MAGIC, _MAGIC_IDENTITY = b"RLW1", b"RLW2"
_HEAD = struct.Struct("<4sQqQBBH")  # 32 bytes
_CRC = struct.Struct("<I")
HEADER_SIZE = _HEAD.size + _CRC.size


@dataclass(frozen=True)
class WalEntry:
    seq: int
    received_ns: int
    content_type: int
    encoding: int
    body: bytes
    identity: str | None = None  # the writing token's node identity (None: a shared token)


class WalFailure(RuntimeError):
    """The WAL could not be made durable: the archive must stop acknowledging."""


def _segment_first_seq(name: str) -> int:
    return int(name.split(".", 1)[0])


class Wal:
    def __init__(self, directory: str, segment_size: int) -> None:
        self.directory = directory
        self.segment_size = segment_size
        os.makedirs(directory, exist_ok=True)
        self.last_seq = 0  # highest seq written
        self.durable_seq = 0  # highest seq known to be on disk
        self._fd: int | None = None
        self._segment_bytes = 0
        self._sync_lock = threading.Lock()  # held while fsyncing or rotating
        self._cond = threading.Condition()
        self._leader_busy = False
        self._failure: BaseException | None = None

    # --- replay --------------------------------------------------------------------------------
    def segments(self) -> list[str]:
        names = [n for n in os.listdir(self.directory) if n.endswith(".wal") and n.split(".")[0].isdigit()]
        return sorted(names, key=_segment_first_seq)

    def replay(self) -> Iterator[WalEntry]:
        """Every intact entry in seq order; torn tails are cut. Sets `last_seq`."""
        for name in self.segments():
            path = os.path.join(self.directory, name)
            yield from self._replay_segment(path)

    def _replay_segment(self, path: str) -> Iterator[WalEntry]:
        with open(path, "rb") as handle:
            data = handle.read()
        position = 0
        while position < len(data):
            entry, end = self._parse(data, position)
            if entry is None:
                log.warning("WAL %s: torn or corrupt entry at byte %d of %d; cutting the segment there",
                            path, position, len(data))
                with open(path, "r+b") as handle:
                    handle.truncate(position)
                    os.fsync(handle.fileno())
                return
            if entry.seq <= self.last_seq:
                log.warning("WAL %s: entry %d repeats an earlier sequence number; skipped", path, entry.seq)
            else:
                self.last_seq = entry.seq
                yield entry
            position = end

    @staticmethod
    def _parse(data: bytes, position: int) -> tuple[WalEntry | None, int]:
        if len(data) - position < HEADER_SIZE:
            return None, position
        magic, seq, received, length, ctype, encoding, name_length = _HEAD.unpack_from(data, position)
        (crc,) = _CRC.unpack_from(data, position + _HEAD.size)
        start = position + HEADER_SIZE
        end = start + length
        if magic not in (_MAGIC, _MAGIC_IDENTITY) or end > len(data):
            return None, position
        body = data[start:end]
        if zlib.crc32(body, zlib.crc32(data[position:position + _HEAD.size])) != crc:
            return None, position
        identity = None
        if magic == _MAGIC_IDENTITY:
            if name_length > length:
                return None, position
            identity, body = body[:name_length].decode("utf-8"), body[name_length:]
        return WalEntry(seq, received, ctype, encoding, body, identity), end

    # --- append --------------------------------------------------------------------------------
    def open_for_append(self) -> None:
        """Start a fresh segment after replay (replayed segments are never appended to)."""
        self.durable_seq = self.last_seq
        self._open_segment(self.last_seq + 1)

    def _open_segment(self, first_seq: int) -> None:
        path = os.path.join(self.directory, f"{first_seq:020d}.wal")
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._segment_bytes = os.fstat(self._fd).st_size
        sync_directory(self.directory)

    def append(self, body: bytes, content_type: int, encoding: int, received_ns: int,
               identity: str | None = None) -> int:
        """Write one entry (not yet durable) and return its seq. Callers serialize appends."""
        self._raise_if_failed()
        if self._segment_bytes >= self.segment_size:
            self._rotate()
        seq = self.last_seq + 1
        name = identity.encode("utf-8") if identity is not None else b""
        magic = _MAGIC if identity is None else _MAGIC_IDENTITY
        head = _HEAD.pack(magic, seq, received_ns, len(name) + len(body), content_type, encoding, len(name))
        crc = zlib.crc32(body, zlib.crc32(name, zlib.crc32(head)))
        try:
            self._write_all(head + _CRC.pack(crc) + name, body)
        except OSError as exc:  # a partial entry may be on disk: later entries would sit behind it
            self._failure = exc
            raise WalFailure(f"WAL write failed: {exc}") from exc
        self._segment_bytes += HEADER_SIZE + len(name) + len(body)
        self.last_seq = seq
        return seq

    def _write_all(self, header: bytes, body: bytes) -> None:
        """Header and body in one `writev` (no concatenation copy of the body, one syscall)."""
        assert self._fd is not None
        views = [memoryview(header), memoryview(body)]
        while views:
            written = os.writev(self._fd, views)
            while views and written >= len(views[0]):
                written -= len(views[0])
                views.pop(0)
            if views:
                views[0] = views[0][written:]

    def _rotate(self) -> None:
        with self._sync_lock:
            assert self._fd is not None
            self._fsync(self._fd)
            os.close(self._fd)
            self.durable_seq = max(self.durable_seq, self.last_seq)
            self._open_segment(self.last_seq + 1)

    # --- durability ----------------------------------------------------------------------------
    def _fsync(self, fd: int) -> None:
        try:
            os.fdatasync(fd)
        except OSError as exc:
            self._failure = exc
            raise WalFailure(f"WAL fsync failed: {exc}") from exc

    def _raise_if_failed(self) -> None:
        if self._failure is not None:
            raise WalFailure(f"WAL unusable after an fsync failure: {self._failure}")

    def sync_to(self, seq: int) -> None:
        """Block until every entry up to `seq` is on disk (group commit)."""
        while True:
            with self._cond:
                self._raise_if_failed()
                if self.durable_seq >= seq:
                    return
                if self._leader_busy:
                    self._cond.wait(timeout=1.0)
                    continue
                self._leader_busy = True
            try:
                with self._sync_lock:
                    target = self.last_seq
                    if self._fd is not None and self.durable_seq < target:
                        self._fsync(self._fd)
                with self._cond:
                    self.durable_seq = max(self.durable_seq, target)
            finally:
                with self._cond:
                    self._leader_busy = False
                    self._cond.notify_all()

    # --- cleanup -------------------------------------------------------------------------------
    def size_bytes(self) -> int:
        total = 0
        for name in self.segments():
            try:
                total += os.path.getsize(os.path.join(self.directory, name))
            except OSError:
                continue
        return total

    def drop_through(self, seq: int) -> int:
        """Delete segments whose every entry is ≤ `seq` (flushed and snapshotted). Returns count."""
        names = self.segments()
        dropped = 0
        for name, following in pairwise(names):
            if _segment_first_seq(following) - 1 <= seq:
                os.unlink(os.path.join(self.directory, name))
                dropped += 1
        if dropped:
            sync_directory(self.directory)
        return dropped

    def close(self) -> None:
        with self._sync_lock:
            if self._fd is not None:
                try:
                    os.fdatasync(self._fd)
                finally:
                    os.close(self._fd)
                    self._fd = None
