"""File identity: device + inode + a checksum of the file's head.

Device and inode alone are not enough: once a file is deleted its inode number is handed to the next
new file. The head checksum tells the two apart. Its length is fixed at first sight (the first
``min(size, HEAD_BYTES)`` bytes; a file is not identified while empty) and kept in the checkpoint, so
the same bytes are compared for the file's whole life.

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


def make_source_id(host: str, ident: FileIdentity, generation: int = 1) -> str:
    base = f"{host}:{ident.dev:x}:{ident.ino:x}:{ident.head_hash}"
    return base if generation <= 1 else f"{base}~g{generation}"
