"""Opening a log path never blocks the agent: its type is checked first and the open is non-blocking.

A FIFO opened for reading blocks in ``open()`` until a writer appears — once, a FIFO named like a
rotation copy (``app.log.1``) froze every file the agent tailed, silently, with SIGTERM ignored. A
device may do worse (a tape rewinds on open). So every path the agent opens goes through
:func:`open_regular`: ``stat`` first (a FIFO, socket, device or directory is refused without being
opened), then ``O_NONBLOCK | O_NOCTTY`` (if the path was swapped for a FIFO since, the open returns at
once instead of waiting), then ``fstat`` of what was opened. O_NONBLOCK changes nothing for a regular
file's reads. Refusals raise :class:`NotAFile`, reported as ``not_a_file`` (discover.UnreadablePaths).
"""

from __future__ import annotations

import os
import stat

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)


def kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


class NotAFile(OSError):
    """The path is not a regular file (nothing was left open)."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(f"{path} is {kind}, not a regular file")
        self.path, self.kind = path, kind


def open_regular(path: str) -> tuple[int, os.stat_result]:
    """(descriptor, fstat) of the regular file at `path`; NotAFile or another OSError otherwise."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise NotAFile(path, kind_of(mode))
    fd = os.open(path, _FLAGS)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # replaced between the stat and the open
        os.close(fd)
        raise NotAFile(path, kind_of(st.st_mode))
    return fd, st
