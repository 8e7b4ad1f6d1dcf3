"""A stuck system call in one source cannot stall the others.

A read (or stat) of a file on a network or FUSE filesystem whose server went away does not return —
not on a timeout, not on SIGTERM (Python runs handlers between bytecodes). The agent's reading
thread did such calls itself, so one dead mount stopped every file. Files on such filesystems
(:func:`may_hang`, by the mount's type in ``/proc/self/mountinfo``: NFS, SMB/CIFS, 9p, Ceph, Lustre,
GlusterFS, AFS, GPFS, BeeGFS, FUSE…) are *guarded*: their per-round work — a read, the poll's look at
size/identity/head, identification — runs on a small pool of threads (:class:`IoGuard`), and the
reading thread only takes the results that are ready. A call that has not returned after
``stall_timeout`` marks its file stuck: one WARNING, ``ranklog_agent_unreadable_paths{reason="stuck"}``
while it lasts; the other files go on. When the call returns, its result is taken as if it had been
quick, and the file is no longer stuck. Local filesystems (ext4, xfs, btrfs, tmpfs, overlay…) are read
directly, as before: this costs nothing on the hot path.

Operations that are rare per file (a truncation's copy lookup, following a rename) stay on the reading
thread; SIGTERM still ends the agent in time (stop_signals).
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("ranklog.agent.io_guard")
_MAY_HANG = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "ceph", "glusterfs", "lustre", "afs", "gpfs",
                       "beegfs", "ncpfs", "coda", "davfs", "fuseblk", "virtiofs"})
QUICK = 0.02  # seconds a guarded call is waited for before the round moves on (a healthy mount answers)
_TYPES: dict[int, str] = {}


def filesystem_type(dev: int) -> str:
    """The type of the mounted filesystem holding device `dev` (``st_dev``), from /proc/self/mountinfo."""
    if dev not in _TYPES:
        wanted = f"{os.major(dev)}:{os.minor(dev)}"
        found = ""
        try:
            with open("/proc/self/mountinfo") as handle:
                for line in handle:
                    fields = line.split()
                    if len(fields) > 2 and fields[2] == wanted and " - " in line:
                        found = line.split(" - ", 1)[1].split()[0]
        except OSError:
            pass
        _TYPES[dev] = found
    return _TYPES[dev]


def may_hang(dev: int) -> bool:
    kind = filesystem_type(dev)
    return kind in _MAY_HANG or kind.startswith("fuse")


class IoGuard:
    """Runs guarded calls on a thread pool; keyed by file, at most one call in flight per file."""

    def __init__(self, stall_timeout: float, workers: int = 4,
                 report: Callable[[str, str, str], None] | None = None,
                 cleared: Callable[[str], None] | None = None) -> None:
        self.stall_timeout = stall_timeout
        self._workers = workers
        # daemon threads: one stuck in the kernel must not keep the process from exiting
        self._work: queue.SimpleQueue = queue.SimpleQueue()
        for number in range(workers):
            threading.Thread(target=self._serve, name=f"ranklog-guarded-io-{number}", daemon=True).start()
        self._calls: dict[tuple[int, str], tuple[concurrent.futures.Future, float]] = {}
        self._report, self._cleared = report, cleared
        self.stuck: dict[int, str] = {}  # uid of a file whose call is stuck → its path
        self._stuck_calls: dict[int, set[str]] = {}  # uid → what of each of its calls that is stuck

    def call(self, uid: int, path: str, what: str, fn: Callable[[], Any]) -> tuple[bool, Any]:
        """(True, fn's result) once `fn` has run for this file, else (False, None): still running. Its
        exception, if it raised, is raised here, when its result is taken."""
        key = (uid, what)
        pending = self._calls.get(key)
        if pending is None:
            future: concurrent.futures.Future = concurrent.futures.Future()
            self._work.put((future, fn))
            self._calls[key] = (future, time.monotonic())
            concurrent.futures.wait([future], timeout=QUICK)
        else:
            future, started = pending
            if not future.done():
                stuck_calls = self._stuck_calls.setdefault(uid, set())
                if time.monotonic() - started >= self.stall_timeout and what not in stuck_calls:
                    stuck_calls.add(what)
                if stuck_calls and uid not in self.stuck:
                    self.stuck[uid] = path
                    log.warning("%s of %s has not returned for %.0f s (its network or FUSE filesystem stopped "
                                "answering?); the other files go on", what, path, time.monotonic() - started)
                    if self._report is not None:
                        self._report(path, "stuck", f"{what} has not returned for {self.stall_timeout:g} s")
                return False, None
        if not future.done():
            return False, None
        del self._calls[key]
        stuck_calls = self._stuck_calls.get(uid)
        if stuck_calls is not None:  # this call, and any other of the file's that has returned meanwhile
            stuck_calls.discard(what)
            for other in list(stuck_calls):
                pending_other = self._calls.get((uid, other))
                if pending_other is None or pending_other[0].done():
                    stuck_calls.discard(other)
        # the file answers again once none of its calls is stuck (another call returning proves nothing)
        if not stuck_calls and self._stuck_calls.pop(uid, None) is not None and self.stuck.pop(uid, None) is not None:
            log.info("%s answers again", path)
            if self._cleared is not None:
                self._cleared(path)
        return True, future.result()

    def _serve(self) -> None:
        while True:
            item = self._work.get()
            if item is None:
                return
            future, fn = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to the caller with the result
                future.set_exception(exc)

    def close(self) -> None:
        for _ in range(self._workers):
            self._work.put(None)
