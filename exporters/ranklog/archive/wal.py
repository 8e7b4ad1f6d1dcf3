"""The write-ahead log: request bodies appended as they arrived, fsynced before the ACK.

Entries hold the raw body bytes (still gzip/zstd/Arrow-compressed as sent — nothing is
re-encoded on the hot path) with the content type, encoding and receive time needed to decode them
again. Layout: ``<state>/wal/<first-seq, 20 digits>.wal`` segments, each opening with a preamble
(``"RLWS" | version u32 | key 16 bytes | crc32``) and then entries::

    magic "RLW3" | seq u64 | received_ns i64 | length u64 | records u32 | content type u8 |
    encoding u8 | identity length u16 | body crc32 u32 | mac 8 bytes | identity | body

``mac`` is a blake2b of the 40 header bytes before it, keyed with the WAL's random key (kept in
``wal/wal.key`` and in every segment's preamble); ``length`` counts the identity and the body, which
the crc covers; ``records`` is how many records the entry added (what is lost if its body is
damaged). An entry written for a token bound to a node identity (:mod:`.auth`) carries it, so
replay rebuilds the same identity-namespaced dedup keys. Segments written before this framing
(``RLW1``/``RLW2`` entries without a preamble, one crc over header and body) stay readable.

Group commit: appends only `write()`; a caller that needs durability calls :meth:`Wal.sync_to`. The
first waiter becomes the leader, fdatasyncs everything written so far and wakes every waiter its
sync covered; the others wait. So N concurrent requests cost one fsync, not N.

Replay verifies every entry and *resynchronises* past damage: the next entry is the next place
where an authentic header starts (the keyed mac makes a header forged inside a request body, or
found by chance in one, fail the check), so one damaged entry costs that entry only. Damage is
told apart from a torn tail — the end of a segment where an append was cut by a crash, never
acknowledged because an ACK waits for the fsync of its whole entry: fewer bytes than a header, or an
authentic header whose body is incomplete. Each damaged region is returned in :attr:`Wal.damage`
(bytes, entries, records when the header survived, the sequence numbers it can hold) for the
pipeline to count and report; after that report is durable, :meth:`Wal.set_aside` hard-links the
damaged segment into ``wal/damaged/`` as it was and replaces it by a copy holding its intact
entries. Nothing is ever truncated in place.

Sequence numbers never go backwards: :meth:`open_for_append` starts after the highest of the
replayed entries, the segment names, and the floor the caller knows (what Parquet and the dedup
snapshot already cover), so a WAL that was cut or lost cannot hand out numbers that replay would
take as already applied.

Failures: an append or fsync error makes the WAL unusable (a partial entry may be on disk; after a
failed fsync the page cache's state is unknown) — :class:`WalFailure` with ``retryable`` False. A
segment that cannot be opened (rotation) leaves nothing behind: ``retryable`` True, and the next
append tries again.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise

from .storage import sync_directory

log = logging.getLogger("ranklog.archive.wal")

_MAGIC = b"RLW3"
_LEGACY = (b"RLW1", b"RLW2")  # RLW2: with an identity
_HEAD = struct.Struct("<4sQqQIBBHI")  # 40 bytes, then the mac
_MAC_SIZE = 8
HEADER_SIZE = _HEAD.size + _MAC_SIZE
_LEGACY_HEAD = struct.Struct("<4sQqQBBH")  # 32 bytes, then crc32 of head and body
_LEGACY_HEADER_SIZE = _LEGACY_HEAD.size + 4
_PREAMBLE_MAGIC = b"RLWS"
_PREAMBLE = struct.Struct("<4sI16s")
PREAMBLE_SIZE = _PREAMBLE.size + 4
_VERSION = 3
KEY_FILE = "wal.key"
DAMAGED_DIR = "damaged"


@dataclass(frozen=True)
class WalEntry:
    seq: int
    received_ns: int
    content_type: int
    encoding: int
    body: bytes
    identity: str | None = None  # the writing token's node identity (None: a shared token)
    records: int | None = None  # records the entry added (None: written before the count was framed)


@dataclass
class WalDamage:
    """One damaged region of a segment, found by replay."""

    segment: str  # file name
    position: int  # byte offset of the region in the segment
    size: int  # bytes in the region
    entries: int  # entries it held (at least 1)
    records: int | None  # records they added, when every damaged entry's header survived
    first_seq: int  # the sequence numbers the region can hold
    last_seq: int | None  # None: unknown (damage at the end of the newest segment)
    received_ns: int | None  # when its first entry arrived (or the entry before it), if known


class WalFailure(RuntimeError):
    """The WAL could not be made durable: the archive must stop acknowledging."""

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


def _segment_first_seq(name: str) -> int:
    return int(name.split(".", 1)[0])


def _mac(key: bytes, head: bytes) -> bytes:
    return hashlib.blake2b(head, key=key, digest_size=_MAC_SIZE).digest()


def _preamble(key: bytes) -> bytes:
    head = _PREAMBLE.pack(_PREAMBLE_MAGIC, _VERSION, key)
    return head + struct.pack("<I", zlib.crc32(head))


@dataclass
class _Parsed:
    entry: WalEntry | None = None
    end: int = 0
    torn: bool = False  # an append cut short at the end of the segment
    # a damaged entry whose header is authentic: its seq, records and receive time
    header: tuple[int, int, int] | None = None


class Wal:
    def __init__(self, directory: str, segment_size: int) -> None:
        self.directory = directory
        self.segment_size = segment_size
        os.makedirs(directory, exist_ok=True)
        self.key = self._load_key()
        self.last_seq = 0  # highest seq written
        self.durable_seq = 0  # highest seq known to be on disk
        self.damage: list[WalDamage] = []  # found by the last replay
        # damaged segment → (its key, the byte spans of its intact entries)
        self._rewrites: dict[str, tuple[bytes | None, list[tuple[int, int]]]] = {}
        self._fd: int | None = None
        self._segment_bytes = 0
        self._sync_lock = threading.Lock()  # held while fsyncing or rotating
        self._cond = threading.Condition()
        self._leader_busy = False
        self._failure: BaseException | None = None

    def _load_key(self) -> bytes:
        path = os.path.join(self.directory, KEY_FILE)
        try:
            with open(path, "rb") as handle:
                key = handle.read()
            if len(key) == 16:
                return key
            log.warning("WAL key file %s is damaged; segments are authenticated with their own copy", path)
        except FileNotFoundError:
            pass
        key = secrets.token_bytes(16)
        temp = f"{path}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, key)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
        sync_directory(self.directory)
        return key

    # --- replay --------------------------------------------------------------------------------
    def segments(self) -> list[str]:
        names = [n for n in os.listdir(self.directory) if n.endswith(".wal") and n.split(".")[0].isdigit()]
        return sorted(names, key=_segment_first_seq)

    def replay(self) -> Iterator[WalEntry]:
        """Every intact entry in seq order, past damaged ones (see the module docstring). Sets
        `last_seq` and `damage`."""
        self.damage = []
        self._rewrites = {}
        names = self.segments()
        for index, name in enumerate(names):
            following = _segment_first_seq(names[index + 1]) if index + 1 < len(names) else None
            yield from self._replay_segment(name, following)

    def _segment_key(self, data: bytes, name: str) -> tuple[bytes | None, int]:
        """(key, where entries start) of a segment: its preamble's key, else the WAL's; None for a
        segment written before preambles (legacy entries carry their own crc)."""
        if not data.startswith(_PREAMBLE_MAGIC):
            return None, 0
        if len(data) >= PREAMBLE_SIZE:
            head = data[:_PREAMBLE.size]
            (crc,) = struct.unpack_from("<I", data, _PREAMBLE.size)
            if zlib.crc32(head) == crc:
                return _PREAMBLE.unpack(head)[2], PREAMBLE_SIZE
        log.warning("WAL %s: damaged preamble; authenticating its entries with %s", name, KEY_FILE)
        return self.key, PREAMBLE_SIZE

    def _replay_segment(self, name: str, following: int | None) -> Iterator[WalEntry]:
        path = os.path.join(self.directory, name)
        with open(path, "rb") as handle:
            data = handle.read()
        key, position = self._segment_key(data, name)
        intact: list[tuple[int, int]] = []
        previous: WalEntry | None = None
        damaged = False
        while position < len(data):
            parsed = self._parse(data, position, key)
            if parsed.entry is not None:
                entry = parsed.entry
                intact.append((position, parsed.end))
                if entry.seq <= self.last_seq:
                    log.warning("WAL %s: entry %d repeats an earlier sequence number; skipped", path, entry.seq)
                else:
                    self.last_seq = entry.seq
                    yield entry
                previous, position = entry, parsed.end
                continue
            end = parsed.end if parsed.header is not None else self._resync(data, position + 1, key)
            # at the end: a cut append, bytes too few to hold an entry, or (newest segment) zeros a power
            # loss left where unsynced pages were
            if end == len(data) and (parsed.torn or end - position < HEADER_SIZE
                                     or (following is None and not data[position:].strip(b"\0"))):
                log.info("WAL %s: the last %d byte(s) are an append a crash cut short (never acknowledged); "
                         "ignored", path, len(data) - position)
                break
            damaged = True
            after = self._parse(data, end, key).entry if end < len(data) else None
            self.damage.append(self._describe(name, position, end, parsed, previous, after, following))
            position = end
        if damaged:
            self._rewrites[name] = (key, intact)

    def _describe(self, name: str, start: int, end: int, parsed: _Parsed, previous: WalEntry | None,
                  after: WalEntry | None, following: int | None) -> WalDamage:
        first = (previous.seq if previous is not None else _segment_first_seq(name) - 1) + 1
        received = previous.received_ns if previous is not None else None
        if parsed.header is not None:  # the header survived: exactly this entry
            seq, records, received = parsed.header
            damage = WalDamage(name, start, end - start, 1, records, seq, seq, received)
        else:
            last = after.seq - 1 if after is not None else (following - 1 if following is not None else None)
            entries = max(1, last - first + 1) if last is not None else 1
            damage = WalDamage(name, start, end - start, entries, None, first, last, received)
        log.error("WAL %s: %d damaged byte(s) at %d (%d entr%s, seq %d..%s); replay goes on after them", name,
                  damage.size, start, damage.entries, "y" if damage.entries == 1 else "ies", damage.first_seq,
                  "?" if damage.last_seq is None else damage.last_seq)
        return damage

    def _parse(self, data: bytes, position: int, key: bytes | None) -> _Parsed:
        if key is None:
            return self._parse_legacy(data, position)
        remaining = len(data) - position
        if remaining < HEADER_SIZE:
            return _Parsed(torn=True)
        head = data[position:position + _HEAD.size]
        if head[:4] != _MAGIC or _mac(key, head) != data[position + _HEAD.size:position + HEADER_SIZE]:
            return _Parsed()
        _, seq, received, length, records, ctype, encoding, name_length, crc = _HEAD.unpack(head)
        start = position + HEADER_SIZE
        end = start + length
        if end > len(data):
            return _Parsed(torn=True)
        body = data[start:end]
        if zlib.crc32(body) != crc or name_length > length:
            return _Parsed(end=end, header=(seq, records, received))
        identity = None
        if name_length:
            try:
                identity = body[:name_length].decode("utf-8")
            except UnicodeDecodeError:
                return _Parsed(end=end, header=(seq, records, received))
            body = body[name_length:]
        return _Parsed(WalEntry(seq, received, ctype, encoding, body, identity, records), end)

    @staticmethod
    def _parse_legacy(data: bytes, position: int) -> _Parsed:
        if len(data) - position < _LEGACY_HEADER_SIZE:
            return _Parsed(torn=True)
        magic, seq, received, length, ctype, encoding, name_length = _LEGACY_HEAD.unpack_from(data, position)
        (crc,) = struct.unpack_from("<I", data, position + _LEGACY_HEAD.size)
        start = position + _LEGACY_HEADER_SIZE
        end = start + length
        if magic not in _LEGACY:
            return _Parsed()
        if end > len(data):
            return _Parsed(torn=True)
        body = data[start:end]
        if zlib.crc32(body, zlib.crc32(data[position:position + _LEGACY_HEAD.size])) != crc:
            return _Parsed()
        identity = None
        if magic == _LEGACY[1]:
            if name_length > length:
                return _Parsed()
            identity, body = body[:name_length].decode("utf-8", "replace"), body[name_length:]
        return _Parsed(WalEntry(seq, received, ctype, encoding, body, identity), end)

    def _resync(self, data: bytes, start: int, key: bytes | None) -> int:
        """Where the next authentic entry starts at or after `start` (the segment's end if none)."""
        magics = (_MAGIC,) if key is not None else _LEGACY
        while True:
            found = [i for i in (data.find(m, start) for m in magics) if i >= 0]
            if not found:
                return len(data)
            candidate = min(found)
            parsed = self._parse(data, candidate, key)
            if parsed.entry is not None or parsed.header is not None:
                return candidate
            start = candidate + 1

    def set_aside(self) -> list[str]:
        """Keep each damaged segment of the last replay in ``damaged/`` as it was, and put a copy holding
        only its intact entries in its place. Call once the damage is reported durably. Returns the
        kept paths."""
        kept = []
        for name, (key, spans) in self._rewrites.items():
            path = os.path.join(self.directory, name)
            aside_dir = os.path.join(self.directory, DAMAGED_DIR)
            os.makedirs(aside_dir, mode=0o700, exist_ok=True)
            aside = os.path.join(aside_dir, f"{name}.{time.time_ns()}")
            os.link(path, aside)
            sync_directory(aside_dir)
            with open(path, "rb") as handle:
                data = memoryview(handle.read())
            temp = os.path.join(self.directory, f".{name}.intact")
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                self._write_all(_preamble(key) if key is not None else b"", b"".join(data[a:b] for a, b in spans), fd)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, path)
            sync_directory(self.directory)
            log.warning("WAL %s: damaged segment kept as %s; replaced by its %d intact entr%s", name, aside,
                        len(spans), "y" if len(spans) == 1 else "ies")
            kept.append(aside)
        self._rewrites = {}
        return kept

    # --- append --------------------------------------------------------------------------------
    def open_for_append(self, floor: int = 0) -> None:
        """Start a fresh segment after replay (replayed segments are never appended to). Sequence
        numbers continue after the highest of: the replayed entries, the segment names, `floor`."""
        names = self.segments()
        named = _segment_first_seq(names[-1]) - 1 if names else 0
        self.last_seq = max(self.last_seq, floor, named)
        self.durable_seq = self.last_seq
        self._open_segment(self.last_seq + 1)

    def _open_segment(self, first_seq: int) -> None:
        path = os.path.join(self.directory, f"{first_seq:020d}.wal")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # a replayed segment with nothing after its torn tail: keep it as it is
            self.last_seq = first_seq
            self._open_segment(first_seq + 1)
            return
        try:
            self._write_all(_preamble(self.key), b"", fd)
            sync_directory(self.directory)
        except OSError:
            os.close(fd)
            raise
        self._fd = fd
        self._segment_bytes = PREAMBLE_SIZE

    def append(self, body: bytes, content_type: int, encoding: int, received_ns: int,
               identity: str | None = None, records: int = 0) -> int:
        """Write one entry (not yet durable) and return its seq. Callers serialize appends."""
        self._raise_if_failed()
        if self._fd is None or self._segment_bytes >= self.segment_size:
            self._rotate()
        seq = self.last_seq + 1
        name = identity.encode("utf-8") if identity is not None else b""
        crc = zlib.crc32(body, zlib.crc32(name))
        head = _HEAD.pack(_MAGIC, seq, received_ns, len(name) + len(body), min(records, 2**32 - 1), content_type,
                          encoding, len(name), crc)
        try:
            self._write_all(head + _mac(self.key, head) + name, body)
        except OSError as exc:  # a partial entry may be on disk: later entries would sit behind it
            self._failure = exc
            raise WalFailure(f"WAL write failed: {exc}") from exc
        self._segment_bytes += HEADER_SIZE + len(name) + len(body)
        self.last_seq = seq
        return seq

    def _write_all(self, header: bytes, body: bytes, fd: int | None = None) -> None:
        """Header and body in one `writev` (no concatenation copy of the body, one syscall)."""
        fd = self._fd if fd is None else fd
        assert fd is not None
        views = [view for view in (memoryview(header), memoryview(body)) if len(view)]
        while views:
            written = os.writev(fd, views)
            while views and written >= len(views[0]):
                written -= len(views[0])
                views.pop(0)
            if views:
                views[0] = views[0][written:]

    def _rotate(self) -> None:
        """Close the full segment (after an fsync) and open the next; a segment that cannot be opened
        is a retryable failure (nothing was written), the next append tries again."""
        with self._sync_lock:
            if self._fd is not None:
                self._fsync(self._fd)
                fd, self._fd = self._fd, None  # never keep a closed descriptor's number: it is reused
                os.close(fd)
                self.durable_seq = max(self.durable_seq, self.last_seq)
            try:
                self._open_segment(self.last_seq + 1)
            except OSError as exc:
                raise WalFailure(f"cannot open a new WAL segment in {self.directory}: {exc}", retryable=True) from exc

    # --- durability ----------------------------------------------------------------------------
    def _fsync(self, fd: int) -> None:
        try:
            os.fdatasync(fd)
        except OSError as exc:
            self._failure = exc
            raise WalFailure(f"WAL fsync failed: {exc}") from exc

    def _raise_if_failed(self) -> None:
        if self._failure is not None:
            raise WalFailure(f"WAL unusable after a failed write or fsync: {self._failure}")

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
                fd, self._fd = self._fd, None
                try:
                    os.fdatasync(fd)
                finally:
                    os.close(fd)
