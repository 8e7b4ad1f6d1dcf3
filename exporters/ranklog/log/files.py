"""Where records go on disk: naming, size rotation and retention of one process's files.

Naming (the agent and ``ranklog query --log_dir`` recognise ranklog files by it)::

    <log_dir>/<job>/<host>/rank-<rank>.pid-<pid>.<part:04d>.jsonl     (``.log`` for format: text)

``job`` is ``nojob`` and ``rank`` is ``x`` when unknown. ``part`` starts at 0000 and goes up by one
each time the file would grow past ``rotation`` bytes; files are never renamed, so a tailer can
keep reading a part until it is complete. If parts for the same rank and pid already exist (pid
reuse, e.g. PID 1 in a container restarted with the same log volume), numbering continues after
the highest one: a process never appends to another process's file, so ``seq`` restarts only in a
new file. Files are opened on the first write: a process that logs nothing leaves nothing behind.

Retention deletes whole parts whose last write is older than ``retention``, on this host, in every
job directory under ``log_dir`` (each host cleans its own: log dirs on shared storage are safe),
never the part being written. It runs when a file is opened and at most once per
``RETENTION_EVERY`` seconds.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
import time
from pathlib import Path

from .process_identity import Identity, safe_path_part

FILE_PATTERN = re.compile(r"^rank-(?P<rank>[^.]+)\.pid-(?P<pid>\d+)\.(?P<part>\d{4,})\.(?P<ext>jsonl|log)$")
RETENTION_EVERY = 3600.0


def file_name(identity: Identity, part: int, fmt: str) -> str:
    ext = "jsonl" if fmt == "json" else "log"
    return f"rank-{identity.path_rank}.pid-{identity.pid}.{part:04d}.{ext}"


def shared_root(log_dir: Path) -> None:
    """The default root under the temp directory is made like ``/tmp`` itself (1777: anyone may add
    a job directory, only its owner remove it) by whichever process creates it first, so every
    user's jobs on a machine write there, as into Ray's ``/tmp/ray``."""
    if log_dir.exists() or str(log_dir) != os.path.join(tempfile.gettempdir(), "ranklog"):
        return
    try:
        log_dir.mkdir(parents=True)
        os.chmod(log_dir, 0o1777)
    except FileExistsError:
        pass  # another rank made it first
    except OSError:
        pass  # the mkdir of the job directory reports what is wrong


def directory(log_dir: str | os.PathLike[str], identity: Identity) -> Path:
    return Path(log_dir) / identity.path_job / safe_path_part(identity.host)


class PartWriter:
    """Appends batches of encoded lines to the current part, rotating by size and applying retention."""

    def __init__(self, log_dir: str | os.PathLike[str], identity: Identity, fmt: str,
                 rotation: int, retention: float) -> None:
        self.log_dir = Path(log_dir)
        self.identity = identity
        self.format = fmt
        self.rotation = rotation
        self.retention = retention
        self.dir = directory(log_dir, identity)
        self.part = -1
        self.path: Path | None = None
        self._fd: int | None = None
        self._size = 0
        self._retention_due = 0.0

    def _first_free_part(self) -> int:
        prefix = f"rank-{self.identity.path_rank}.pid-{self.identity.pid}."
        highest = -1
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return 0
        for name in names:
            if name.startswith(prefix):
                match = FILE_PATTERN.match(name)
                if match:
                    highest = max(highest, int(match.group("part")))
        return highest + 1

    def _open_next(self) -> None:
        self.close()
        shared_root(self.log_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.part = self._first_free_part() if self.part < 0 else self.part + 1
        while True:
            path = self.dir / file_name(self.identity, self.part, self.format)
            try:
                self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o644)
                break
            except FileExistsError:
                self.part += 1
        self.path = path
        self._size = 0
        self.apply_retention()

    def write(self, texts: list[str]) -> None:
        """Write `texts` (lines ending in a newline) as UTF-8, starting new parts where `rotation` requires."""
        if self._fd is not None:
            data = "".join(texts).encode("utf-8", "backslashreplace")
            if self._size + len(data) <= self.rotation:  # the common case: the batch fits
                self._write_all(data)
                if time.monotonic() >= self._retention_due:
                    self.apply_retention()
                return
        lines = [text.encode("utf-8", "backslashreplace") for text in texts]
        chunk: list[bytes] = []
        chunk_size = 0
        for line in lines:
            if self._fd is None or (self._size + chunk_size + len(line) > self.rotation and self._size + chunk_size > 0):
                if chunk:
                    self._write_all(b"".join(chunk))
                    chunk, chunk_size = [], 0
                if self._fd is None or self._size > 0:
                    self._open_next()
            chunk.append(line)
            chunk_size += len(line)
        if chunk:
            self._write_all(b"".join(chunk))
        if time.monotonic() >= self._retention_due:
            self.apply_retention()

    def _write_all(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        while view:
            try:
                written = os.write(self._fd, view)
            except InterruptedError:
                continue
            view = view[written:]
            self._size += written

    def apply_retention(self, now: float | None = None) -> list[Path]:
        """Delete this host's parts older than `retention` (all jobs); returns what was deleted."""
        self._retention_due = time.monotonic() + RETENTION_EVERY
        if self.retention <= 0:
            return []
        cutoff = (time.time() if now is None else now) - self.retention
        host_dir = safe_path_part(self.identity.host)
        deleted: list[Path] = []
        try:
            job_dirs = [entry.path for entry in os.scandir(self.log_dir) if entry.is_dir(follow_symlinks=False)]
        except OSError:
            return deleted
        for job_dir in job_dirs:
            try:
                entries = list(os.scandir(os.path.join(job_dir, host_dir)))
            except OSError:
                continue
            for entry in entries:
                if not FILE_PATTERN.match(entry.name) or (self.path is not None and entry.path == str(self.path)):
                    continue
                try:
                    if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                        os.unlink(entry.path)
                        deleted.append(Path(entry.path))
                except OSError as exc:
                    if exc.errno != errno.ENOENT:
                        continue
        return deleted

    def close(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None
