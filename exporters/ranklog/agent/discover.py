"""Discovery: which files the sources' globs match right now.

Discovery polls: every ``poll_interval`` (250 ms by default) the globs are expanded again (a
directory listing per glob level — cheap for the few hundred files a training node writes), and
where Linux inotify works it also scans as soon as a directory the globs cover changes
(:mod:`.inotify`), so a new or renamed file is picked up in milliseconds; the poll stays as the
safety net for what inotify cannot see (network filesystems, watch limits). Compressed files (``*.gz``, ``*.1.gz``, ``.bz2``, ``.xz``, ``.zst``) are never
read: on a node they are copies made by logrotate of files the agent already read while they were
plain; reading them again would only duplicate records (old archives are for ``ranklog query
--log_dir``). When two sources match the same file, the first source wins.

Nothing is skipped silently. ``glob`` drops a directory it cannot list without a word, so the globs
are expanded here (:func:`expand`, same pattern language as ``glob.iglob(recursive=True)``) and
every path that matches, or could hold matches, but cannot be read is recorded with a reason:

- ``permission``: a directory that cannot be listed or searched, or a file that cannot be opened
  (EACCES/EPERM: a training user's 0700 torchrun dir, umask 077 files, another user's Ray session);
- ``not_a_file``: a match that is neither a regular file nor a directory (FIFO, socket, device), or
  a plain-path source that names a directory;
- ``missing``: a source given as a plain path (no glob characters) that does not exist — a plain
  path says "this file should be there"; use a glob for files that come and go. A glob's root that
  does not exist yet (``/tmp/ray`` before Ray ran) is not reported;
- ``dangling_symlink``: a match that is a symlink to nothing (a log directory moved away, a
  ``latest.log`` link to a file already deleted);
- ``stuck``: a file whose read or stat has not returned for ``stall_timeout`` (a network or FUSE
  filesystem that stopped answering, :mod:`.io_guard`), until it returns;
- ``error``: any other OS error (EIO, ELOOP…).

:class:`UnreadablePaths` logs each (path, reason) once per agent lifetime (WARNING, so a path that
flaps cannot flood the log; at most :data:`MAX_LOGGED` distinct lines) and sets the gauge
``ranklog_agent_unreadable_paths{reason}`` to the number of paths unreadable in the latest scan
(no path label: cardinality stays at six series). A path that becomes readable is picked up by the
next scan like any new file.
"""

from __future__ import annotations

import errno
import fnmatch
import glob
import logging
import os
import queue
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .agent_config import SourceSpec
from .inotify import open_watch
from .open_file import NotAFile, kind_of, open_regular

COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".zip", ".lz4")
REASONS = ("permission", "missing", "not_a_file", "dangling_symlink", "stuck", "error")
MAX_LOGGED = 4096  # distinct (path, reason) warnings per agent lifetime; the gauge keeps counting past it

log = logging.getLogger("ranklog.agent.discover")
Report = Callable[[str, str, str], None]  # (path, reason, detail)


def dangling(path: str) -> str | None:
    """What a symlink at `path` points to when that does not exist (None: not a dangling symlink)."""
    try:
        target = os.readlink(path)
    except OSError:
        return None
    return None if os.path.exists(path) else target


def report_missing(path: str, report: Report, exc: OSError) -> None:
    """A match that vanished between listing and stat is nothing to read; a dangling symlink is reported."""
    target = dangling(path)
    if target is not None:
        report(path, "dangling_symlink", f"a symlink to {target}, which does not exist")
    elif exc.errno != errno.ENOENT:
        report(path, reason_of(exc), exc.strerror or str(exc))


def reason_of(exc: OSError) -> str:
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission"
    if exc.errno == errno.ENOENT:
        return "missing"
    return "error"


def expand(pattern: str, report: Report, dirs: set[str] | None = None) -> Iterator[str]:
    """``glob.iglob(pattern, recursive=True)``, except that what cannot be read is reported, not dropped.

    Hidden names match only a pattern component that starts with a dot, as in glob; ``**`` follows
    symlinked directories once (a symlink loop ends at the first revisit). `dirs`, when given,
    collects the directories whose change could change the matches (those listed, the parent of a
    plain path, the nearest existing ancestor of a missing one): the ones worth watching.
    """
    dirs = set() if dirs is None else dirs
    if not glob.has_magic(pattern):
        dirs.add(_nearest_existing(os.path.dirname(os.path.abspath(pattern))))
        try:
            mode = os.stat(pattern).st_mode
        except OSError as exc:
            if dangling(pattern) is not None:
                report_missing(pattern, report, exc)
            else:
                report(pattern, reason_of(exc), exc.strerror or str(exc))
            return
        if stat.S_ISDIR(mode):
            report(pattern, "not_a_file", "a plain-path source names a directory (add /*.log or **)")
            return
        yield pattern
        return
    root = os.sep if os.path.isabs(pattern) else os.curdir
    parts = [part for part in pattern.split(os.sep) if part]
    yield from _walk(root, parts, report, set(), dirs)


def _nearest_existing(directory: str) -> str:
    """`directory` or its closest ancestor that exists (where the missing part will be created)."""
    while not os.path.isdir(directory) and os.path.dirname(directory) != directory:
        directory = os.path.dirname(directory)
    return directory


def _scandir(directory: str, report: Report, dirs: set[str]) -> list[os.DirEntry]:
    try:
        with os.scandir(directory) as it:
            entries = list(it)
        dirs.add(os.path.abspath(directory))
        return entries
    except (FileNotFoundError, NotADirectoryError):
        dirs.add(_nearest_existing(os.path.abspath(directory)))
        return []  # a root that does not exist (yet) holds nothing to read
    except OSError as exc:
        report(directory, reason_of(exc), f"cannot list directory: {exc.strerror}")
        return []


def _is_dir(entry: os.DirEntry, report: Report) -> bool:
    try:
        return entry.is_dir()
    except OSError as exc:
        report(entry.path, reason_of(exc), exc.strerror or str(exc))
        return False


def _first_visit(entry: os.DirEntry, visited: set[tuple[int, int]], report: Report) -> bool:
    try:
        st = entry.stat()
    except OSError as exc:
        report(entry.path, reason_of(exc), exc.strerror or str(exc))
        return False
    key = (st.st_dev, st.st_ino)
    if key in visited:
        return False
    visited.add(key)
    return True


def _join(base: str, name: str) -> str:
    return name if base == os.curdir else os.path.join(base, name)


def _walk(base: str, parts: list[str], report: Report, visited: set[tuple[int, int]],
          dirs: set[str]) -> Iterator[str]:
    if not parts:
        yield base
        return
    head, rest = parts[0], parts[1:]
    if head == "**":
        if rest:  # `**` matching zero directories
            yield from _walk(base, rest, report, visited, dirs)
        for entry in _scandir(base, report, dirs):
            if entry.name.startswith("."):
                continue
            child = _join(base, entry.name)
            if not rest:
                yield child
            if _is_dir(entry, report) and _first_visit(entry, visited, report):
                yield from _walk(child, parts, report, visited, dirs)
        return
    if not glob.has_magic(head):
        if rest:
            yield from _walk(_join(base, head), rest, report, visited, dirs)
        else:
            dirs.add(_nearest_existing(os.path.abspath(base)))
            yield from _existing(_join(base, head), report)
        return
    hidden_ok = head.startswith(".")
    for entry in _scandir(base, report, dirs):
        if (entry.name.startswith(".") and not hidden_ok) or not fnmatch.fnmatchcase(entry.name, head):
            continue
        if not rest:
            yield _join(base, entry.name)
        elif _is_dir(entry, report):
            yield from _walk(_join(base, entry.name), rest, report, visited, dirs)


def _existing(path: str, report: Report) -> Iterator[str]:
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError) as exc:
        report_missing(path, report, exc)
        return
    except OSError as exc:
        report(path, reason_of(exc), exc.strerror or str(exc))
        return
    yield path


class UnreadablePaths:
    """Paths the latest scan could not read: one WARNING per (path, reason), a gauge by reason."""

    def __init__(self, gauge=None) -> None:
        self._gauge = gauge
        self._logged: set[tuple[str, str]] = set()
        self._capped = False
        self.current: dict[str, str] = {}
        self._noted: dict[str, tuple[str, str]] = {}  # met outside the scans (rotation copies, restarts)
        self._lock = threading.Lock()
        if gauge is not None:
            for reason in REASONS:
                gauge.labels(reason=reason).set(0)

    def note(self, path: str, reason: str, detail: str) -> None:
        """A path met outside the discovery scans (a rotation copy looked at, a file found again at
        start) that cannot be read: logged now, counted from the next scan on while it stays so."""
        path = os.path.abspath(path)
        with self._lock:
            self._noted[path] = (reason, detail)
        self._log(path, reason, detail)

    def _log(self, path: str, reason: str, detail: str) -> None:
        if (path, reason) in self._logged:
            return
        if len(self._logged) < MAX_LOGGED:
            self._logged.add((path, reason))
            log.warning("cannot read %s (%s: %s): its logs are not collected until it is readable "
                        "(agent uid %d; counted in ranklog_agent_unreadable_paths)", path, reason, detail,
                        os.geteuid())
        elif not self._capped:
            self._capped = True
            log.warning("more than %d unreadable paths: further ones are counted in "
                        "ranklog_agent_unreadable_paths but not logged one by one", MAX_LOGGED)

    def forget(self, path: str) -> None:
        """A noted path is readable again (a stuck file answered)."""
        with self._lock:
            self._noted.pop(os.path.abspath(path), None)

    def _still_noted(self) -> dict[str, tuple[str, str]]:
        """The noted paths that are still there and still not regular files (stuck ones until forgotten)."""
        with self._lock:
            for path, (reason, _) in list(self._noted.items()):
                if reason == "stuck":
                    continue
                try:
                    gone = stat.S_ISREG(os.stat(path).st_mode)
                except OSError as exc:
                    gone = exc.errno == errno.ENOENT and not os.path.islink(path)
                if gone:
                    del self._noted[path]
            return dict(self._noted)

    def publish(self, found: dict[str, tuple[str, str]]) -> None:
        """`found`: path → (reason, detail) of one whole scan (plus what was noted meanwhile)."""
        found = {**self._still_noted(), **found}
        for path, (reason, detail) in found.items():
            self._log(path, reason, detail)
        self.current = {path: reason for path, (reason, _) in found.items()}
        if self._gauge is not None:
            for reason in REASONS:
                self._gauge.labels(reason=reason).set(sum(1 for r in self.current.values() if r == reason))


def is_compressed(path: str) -> bool:
    return path.endswith(COMPRESSED_SUFFIXES)


class Discovery:
    def __init__(self, specs: list[SourceSpec], ignore_dirs: tuple[str, ...] = ()) -> None:
        self.specs = specs
        # The agent's own state dir must never be tailed, even when a glob covers it.
        self._ignore = tuple(os.path.abspath(d) + os.sep for d in ignore_dirs)
        self.unreadable: dict[str, tuple[str, str]] = {}  # of the latest scan: path → (reason, detail)
        self.directories: set[str] = set()  # of the latest scan: where a change could change the matches

    def scan(self) -> dict[str, SourceSpec]:
        found: dict[str, SourceSpec] = {}
        unreadable: dict[str, tuple[str, str]] = {}
        directories: set[str] = set()

        def report(path: str, reason: str, detail: str) -> None:
            path = os.path.abspath(path)
            if not self._excluded(path, None):
                unreadable.setdefault(path, (reason, detail))

        for spec in self.specs:
            pattern = os.path.expanduser(os.path.expandvars(spec.glob))
            for match in expand(pattern, report, directories):
                path = os.path.abspath(match)
                if path in found or is_compressed(path) or self._excluded(path, spec):
                    continue
                try:
                    mode = os.stat(path).st_mode
                except OSError as exc:  # ENOENT: gone between listing and stat, or a dangling symlink
                    report_missing(path, report, exc)
                    continue
                if stat.S_ISREG(mode):
                    found[path] = spec
                elif not stat.S_ISDIR(mode):
                    report(path, "not_a_file", f"matched {spec.glob!r} but is {kind_of(mode)}")
        self.unreadable = unreadable
        self.directories = directories
        return found

    def _excluded(self, path: str, spec: SourceSpec | None) -> bool:
        if self._ignore and (path + os.sep).startswith(self._ignore):
            return True
        if spec is None:
            return False
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
    """Runs :meth:`Discovery.scan` in its own thread and opens new files at once.

    The main loop may be busy parsing a large read for a while; a file created and rotated away (or
    deleted) in that time would otherwise never be seen. This thread opens every new inode as soon
    as a scan sees it and hands the descriptor over, so the bytes stay readable whatever happens to
    the name. Scans run every ``interval`` seconds and, where inotify works (:mod:`.inotify`), as soon
    as a directory the globs cover changes — at most one every ``interval / 10`` and ten times the
    last scan's duration, so a directory that churns (a Ray node starting workers) cannot keep
    discovery busy — after which ``on_change`` tells the main loop to look now.
    """

    def __init__(self, discovery: Discovery, interval: float, unreadable_gauge=None,
                 on_change: Callable[[], None] | None = None, watch: bool = True) -> None:
        self.discovery = discovery
        self.interval = interval
        self.min_gap = interval / 10
        self._gap = self.min_gap
        self.unreadable = UnreadablePaths(unreadable_gauge)
        self.found: dict[str, SourceSpec] = {}
        self.on_change = on_change
        self._opened: queue.SimpleQueue[Opened] = queue.SimpleQueue()
        self._seen: set[tuple[int, int]] = set()
        self._stop = threading.Event()
        self._watch = open_watch() if watch else None
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._run, name="ranklog-discovery", daemon=True)

    @property
    def watching(self) -> set[str]:
        """Directories watched by inotify (empty where it is unavailable)."""
        return self._watch.watched if self._watch is not None else set()

    def scan_once(self) -> dict[str, SourceSpec]:
        found = self.discovery.scan()
        if self._watch is not None:
            self._watch.sync(self.discovery.directories)
        unreadable = dict(self.discovery.unreadable)
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
                fd, st = open_regular(path)  # st: the file actually opened (the name may have moved on)
            except NotAFile as exc:
                unreadable[path] = ("not_a_file", f"replaced by {exc.kind} before it was opened")
                continue
            except OSError as exc:
                if exc.errno != errno.ENOENT:  # ENOENT: rotated away between stat and open; the next scan sees it
                    unreadable[path] = (reason_of(exc), f"cannot open: {exc.strerror}")
                continue
            key = (st.st_dev, st.st_ino)
            present.add(key)
            self._seen.add(key)
            self._opened.put(Opened(path, spec, fd, st))
        self._seen &= present
        self.found = found
        self.unreadable.publish(unreadable)
        return found

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        os.write(self._wake_w, b"x")
        self._thread.join(5)
        for item in self.take():
            os.close(item.fd)
        if not self._thread.is_alive():
            if self._watch is not None:
                self._watch.close()
            os.close(self._wake_r)
            os.close(self._wake_w)

    def take(self) -> list[Opened]:
        out = []
        while True:
            try:
                out.append(self._opened.get_nowait())
            except queue.Empty:
                return out

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.is_set():
            changed = self._wait(last + self.interval - time.monotonic())
            if self._stop.is_set():
                return
            if changed:  # a burst of changes (a job starting, a rotation) is one scan, not one each
                self._stop.wait(max(0.0, last + self._gap - time.monotonic()))
            elif time.monotonic() < last + self.interval:
                continue
            last = time.monotonic()
            before = self._opened.qsize()
            try:
                self.scan_once()
            except Exception:  # a bad glob or an unreadable dir must not stop discovery
                log.exception("discovery scan failed")
                continue
            finally:  # scans on change take at most a tenth of a core, however large the tree
                self._gap = max(self.min_gap, 10 * (time.monotonic() - last))
            if self.on_change is not None and (changed or self._opened.qsize() > before):
                self.on_change()

    def _wait(self, timeout: float) -> bool:
        """Sleep up to `timeout` (or until stopped); True if a watched directory changed meanwhile."""
        if self._watch is None:
            self._stop.wait(max(0.0, timeout))
            return False
        return self._watch.wait(timeout, self._wake_r)
