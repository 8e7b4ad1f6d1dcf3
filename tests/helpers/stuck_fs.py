"""A FUSE filesystem whose reads of one file hang until released: a network mount that stopped answering.

    python -m tests.helpers.stuck_fs MOUNTPOINT RELEASE_FILE

Serves ``stuck.log`` (lines of text): ``getattr``/``open`` answer at once, ``read`` blocks until
RELEASE_FILE exists — what an NFS server that went away does to a reader. Run as a process (fusepy
over libfuse2, foreground); unmount with ``umount -l MOUNTPOINT``.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import time

from fuse import FUSE, FuseOSError, Operations

CONTENT = "".join(f"2026-12-07 10:00:00,000 INFO stuck line {i}\n" for i in range(100)).encode()


class StuckFS(Operations):
    def __init__(self, release: str) -> None:
        self.release = release

    def getattr(self, path, fh=None):
        now = time.time()
        if path == "/":
            return {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2, "st_atime": now, "st_mtime": now, "st_ctime": now}
        if path == "/stuck.log":
            return {"st_mode": stat.S_IFREG | 0o644, "st_nlink": 1, "st_size": len(CONTENT), "st_atime": now,
                    "st_mtime": now - 3600, "st_ctime": now}
        raise FuseOSError(errno.ENOENT)

    def readdir(self, path, fh):
        return [".", "..", "stuck.log"]

    def open(self, path, flags):
        if path != "/stuck.log":
            raise FuseOSError(errno.ENOENT)
        return 0

    def read(self, path, size, offset, fh):
        while not os.path.exists(self.release):
            time.sleep(0.05)
        return CONTENT[offset:offset + size]


if __name__ == "__main__":
    FUSE(StuckFS(sys.argv[2]), sys.argv[1], foreground=True, ro=True, allow_other=False, nothreads=False)
