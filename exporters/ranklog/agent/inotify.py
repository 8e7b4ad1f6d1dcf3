"""Directory change notices (Linux inotify), so that discovery scans when a watched directory changes
instead of at its next poll.

A hint, never the source of truth: discovery still scans every ``poll_interval``, which covers what
inotify cannot see — changes made by another host of a network filesystem, directories beyond the
watch limit (``fs.inotify.max_user_watches``, or :data:`MAX_WATCHES` of this agent), systems without
inotify. The standard library has no binding; the four libc calls go through ``ctypes``.

Only the events that change what a scan finds are asked for: names created, deleted or moved in or
out of a directory, and attribute changes (a ``chmod`` making a 0700 directory readable). Writes to
files are not: the agent's main loop reads its tracked files on its own, and a busy log directory
would otherwise wake discovery on every ``write()``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
import select
import struct

log = logging.getLogger("ranklog.agent.discover")

IN_ATTRIB = 0x00000004
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_ONLYDIR = 0x01000000
IN_IGNORED = 0x00008000  # the kernel dropped a watch (its directory is gone)
MASK = IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, name length (the name follows)
MAX_WATCHES = 8192  # per agent: far more directories than a node's logs use; the rest are polled


def _libc():
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    libc = ctypes.CDLL(name, use_errno=True)
    if not hasattr(libc, "inotify_init1"):
        return None
    libc.inotify_add_watch.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
    libc.inotify_rm_watch.argtypes = (ctypes.c_int, ctypes.c_int)
    return libc


class DirectoryWatch:
    """inotify watches on a set of directories; :meth:`wait` tells whether any of them changed."""

    def __init__(self, libc, fd: int) -> None:
        self._libc = libc
        self.fd = fd
        self._wd: dict[str, int] = {}  # directory → watch descriptor
        self._paths: dict[int, str] = {}
        self._warned = False

    @property
    def watched(self) -> set[str]:
        return set(self._wd)

    def sync(self, directories: set[str]) -> None:
        """Watch exactly `directories` (those a scan listed); unlistable ones are discovery's to report."""
        for path in list(self._wd):
            if path not in directories:
                wd = self._wd.pop(path)
                self._paths.pop(wd, None)
                self._libc.inotify_rm_watch(self.fd, wd)
        for path in sorted(directories - self._wd.keys()):
            if len(self._wd) >= MAX_WATCHES:
                self._warn_limit(f"this agent watches at most {MAX_WATCHES} directories")
                return
            wd = self._libc.inotify_add_watch(self.fd, os.fsencode(path), MASK)
            if wd < 0:
                code = ctypes.get_errno()
                if code == errno.ENOSPC:
                    self._warn_limit("fs.inotify.max_user_watches is reached")
                    return
                continue  # gone or unreadable since the scan: the next scan reports or drops it
            self._wd[path], self._paths[wd] = wd, path

    def _warn_limit(self, why: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning("%s: further directories are scanned every poll_interval instead of on change", why)

    def wait(self, timeout: float, wake_fd: int) -> bool:
        """Block up to `timeout` seconds or until `wake_fd` is readable; True if a watched directory changed."""
        ready, _, _ = select.select([self.fd, wake_fd], [], [], max(0.0, timeout))
        return self.fd in ready and self._drain()

    def _drain(self) -> bool:
        changed = False
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return changed
            except OSError as exc:
                if exc.errno == errno.EINTR:
                    continue
                raise
            position = 0
            while position + _EVENT.size <= len(data):
                wd, mask, _, length = _EVENT.unpack_from(data, position)
                position += _EVENT.size + length
                changed = True
                if mask & IN_IGNORED:  # the kernel removed it: forget, so a re-created directory is watched anew
                    path = self._paths.pop(wd, None)
                    if path is not None and self._wd.get(path) == wd:
                        del self._wd[path]

    def close(self) -> None:
        os.close(self.fd)


def open_watch() -> DirectoryWatch | None:
    """A new :class:`DirectoryWatch`, or None where inotify is unavailable (then discovery only polls)."""
    try:
        libc = _libc()
    except OSError:
        return None
    if libc is None:
        return None
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    if fd < 0:
        log.warning("inotify unavailable (%s): new files are found by polling every poll_interval",
                    os.strerror(ctypes.get_errno()))
        return None
    return DirectoryWatch(libc, fd)
