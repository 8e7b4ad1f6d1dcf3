"""Discovery: which files the sources' globs match right now.

The standard library has no inotify, so discovery polls: every ``poll_interval`` (250 ms by default)
the globs are expanded again (glob uses ``os.scandir``). A new file is therefore picked up within a
poll period, and the cost is a directory listing per glob level — cheap for the few hundred files a
training node writes. Compressed files (``*.gz``, ``*.1.gz``, ``.bz2``, ``.xz``, ``.zst``) are never
read: on a node they are copies made by logrotate of files the agent already read while they were
plain; reading them again would only duplicate records (old archives are for ``ranklog query
--log_dir``). When two sources match the same file, the first source wins.
"""

from __future__ import annotations

import fnmatch
import glob
import logging
import os
import queue
import stat
import threading
from dataclasses import dataclass

from .agent_config import SourceSpec

COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".zip", ".lz4")


def is_compressed(path: str) -> bool:
    return path.endswith(COMPRESSED_SUFFIXES)


class Discovery:
    def __init__(self, specs: list[SourceSpec], ignore_dirs: tuple[str, ...] = ()) -> None:
        self.specs = specs
        # The agent's own state dir must never be tailed, even when a glob covers it.
        self._ignore = tuple(os.path.abspath(d) + os.sep for d in ignore_dirs)

    def scan(self) -> dict[str, SourceSpec]:
        found: dict[str, SourceSpec] = {}
        for spec in self.specs:
            pattern = os.path.expanduser(os.path.expandvars(spec.glob))
            for match in glob.iglob(pattern, recursive=True):
                path = os.path.abspath(match)
                if path in found or is_compressed(path) or self._excluded(path, spec):
                    continue
                try:
                    mode = os.stat(path).st_mode
                except OSError:
                    continue
                if stat.S_ISREG(mode):
                    found[path] = spec
        return found

    def _excluded(self, path: str, spec: SourceSpec) -> bool:
        if self._ignore and path.startswith(self._ignore):
            return True
        name = os.path.basename(path)
        return any(fnmatch.fnmatch(name, pat) or fnmatch.fnmatch(path, pat) for pat in spec.exclude)


@dataclass
class Opened:
    """A file discovery opened as soon as it saw it (holding the inode so rotation cannot take it away)."""

    path: str
    spec: SourceSpec
    fd: int
    st: os.stat_result


class DiscoveryThread:
    """Runs :meth:`Discovery.scan` every ``interval`` seconds in its own thread and opens new files at once.

    The main loop may be busy parsing a large read for a while; a file created and rotated away (or
    deleted) in that time would otherwise never be seen. This thread opens every new inode within one
    poll period and hands the descriptor over, so the bytes stay readable whatever happens to the name.
    """

    def __init__(self, discovery: Discovery, interval: float) -> None:
        self.discovery = discovery
        self.interval = interval
        self.found: dict[str, SourceSpec] = {}
        self._opened: queue.SimpleQueue[Opened] = queue.SimpleQueue()
        self._seen: set[tuple[int, int]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ranklog-discovery", daemon=True)

    def scan_once(self) -> dict[str, SourceSpec]:
        found = self.discovery.scan()
        present: set[tuple[int, int]] = set()
        for path, spec in found.items():
            try:
                st = os.stat(path)
            except OSError:
                continue
            key = (st.st_dev, st.st_ino)
            present.add(key)
            if key in self._seen:
                continue
            try:
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except OSError:
                continue
            st = os.fstat(fd)  # the file actually opened (the name may have moved on since the stat)
            key = (st.st_dev, st.st_ino)
            present.add(key)
            self._seen.add(key)
            self._opened.put(Opened(path, spec, fd, st))
        self._seen &= present
        self.found = found
        return found

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for item in self.take():
            os.close(item.fd)

    def take(self) -> list[Opened]:
        out = []
        while True:
            try:
                out.append(self._opened.get_nowait())
            except queue.Empty:
                return out

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.scan_once()
            except Exception:  # a bad glob or an unreadable dir must not stop discovery
                logging.getLogger("ranklog.agent.discover").exception("discovery scan failed")
