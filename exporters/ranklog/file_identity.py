"""File identity: device + inode + a checksum of the file's head.

Device and inode alone are not enough: once a file is deleted its inode number is handed to the next
new file. The head checksum tells the two apart. Its length is fixed at first sight (the first
``min(size, HEAD_BYTES)`` bytes; a file is not identified while empty) and kept in the checkpoint, so
the same bytes are compared for the file's whole life.

Device, inode and head are not proof either: a file deleted and recreated while the agent is down can
get the same inode *and* the same first line (the head of a file first seen while short covers only
that). So a checkpoint also holds the file's **birth time** where the filesystem records it (ext4, xfs,
btrfs, tmpfs: ``statx`` ``STATX_BTIME``; 0 where it does not) and a **check hash** of everything
acknowledged up to :data:`CHECK_BYTES` (extended as acknowledgements come, never re-read past that).
A file found again at start whose birth time or check bytes differ is a different file: it is read
from byte 0 as a new generation, and the old one's unshipped tail is counted as lost (deleted).

``source_id`` — the archive's idempotency key together with the byte offset — must be identical for
the same bytes across agent restarts, and different for different bytes. It is built from host,
device, inode and head checksum, deterministically, so a crash before a checkpoint write re-sends the
same keys (the archive deduplicates them). When a file is truncated in place (copytruncate) its
offsets start again from 0 with new content, so it gets a new *generation* (``…~g2``), recorded in
the checkpoint before any byte of the new generation is shipped.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

HEAD_BYTES = 1024
CHECK_BYTES = 64 * 1024  # acknowledged bytes a checkpoint's check hash covers, at most


@dataclass(frozen=True)
class FileIdentity:
    dev: int
    ino: int
    head_len: int
    head_hash: str

    def same_inode(self, st: os.stat_result) -> bool:
        return st.st_dev == self.dev and st.st_ino == self.ino


def head_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def new_head_hasher():
    """An incremental :func:`head_hash` (``update`` piece by piece, ``hexdigest`` gives the same)."""
    return hashlib.blake2b(digest_size=8)


def read_head(fd: int, length: int) -> bytes:
    """The first `length` bytes of an open file (fewer if it is shorter now, e.g. truncated)."""
    return os.pread(fd, length, 0)


def identify(fd: int, st: os.stat_result) -> FileIdentity | None:
    """The identity of an open, non-empty file; None while it is empty."""
    length = min(st.st_size, HEAD_BYTES)
    if length <= 0:
        return None
    head = read_head(fd, length)
    if len(head) < length:
        length = len(head)
        if not length:
            return None
    return FileIdentity(st.st_dev, st.st_ino, length, head_hash(head[:length]))


def head_matches(fd: int, ident: FileIdentity) -> bool:
    """Whether the open file still starts with the bytes this identity was taken from."""
    head = read_head(fd, ident.head_len)
    return len(head) == ident.head_len and head_hash(head) == ident.head_hash


def prefix_hash(fd: int, length: int) -> str | None:
    """The hash of the file's first `length` bytes; None when it is shorter now."""
    data = os.pread(fd, length, 0)
    return head_hash(data) if len(data) == length else None


_STATX_BTIME, _AT_EMPTY_PATH = 0x800, 0x1000
_statx = None


def birth_time_ns(fd: int) -> int:
    """When the open file was created (statx STATX_BTIME), in ns; 0 where the filesystem or libc cannot tell."""
    global _statx
    import ctypes
    import ctypes.util

    if _statx is None:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            _statx = libc.statx
            _statx.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
        except (OSError, AttributeError):
            _statx = False
    if not _statx:
        return 0
    buffer = ctypes.create_string_buffer(256)  # struct statx: stx_mask at 0, stx_btime at 80 (tv_sec i64, tv_nsec u32)
    if _statx(fd, b"", _AT_EMPTY_PATH, _STATX_BTIME, buffer) != 0:
        return 0
    mask = int.from_bytes(buffer.raw[0:4], "little")
    if not mask & _STATX_BTIME:
        return 0
    seconds = int.from_bytes(buffer.raw[80:88], "little", signed=True)
    return seconds * 1_000_000_000 + int.from_bytes(buffer.raw[88:92], "little")


def make_source_id(host: str, ident: FileIdentity, generation: int = 1) -> str:
    base = f"{host}:{ident.dev:x}:{ident.ino:x}:{ident.head_hash}"
    return base if generation <= 1 else f"{base}~g{generation}"
