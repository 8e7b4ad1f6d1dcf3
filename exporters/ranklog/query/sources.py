"""Where records are read from: an archive root (local or object storage), a running archive over
HTTP, or a raw log directory parsed on the fly.

:func:`open_source` picks one from the CLI's ``--archive`` / ``--log_dir`` / ``--token-file``. A
source only knows how to *find* data; :mod:`ranklog.query.engine` filters it.

Archive layout (DESIGN.md): ``<root>/date=YYYY-MM-DD/hour=HH/<archive-id>-<seq>.parquet``. Names that
start with ``.`` or ``_`` (temp files, sidecars) are ignored, as pyarrow.dataset does. Listing is
pruned by the time range before any file is opened: only the date directories, then the hour
directories, that can hold records of the range are listed.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..archive_layout import (
    DATE_DIR,
    DAY_NS,
    HOUR_DIR,
    HOUR_NS,
    LEASE_NAME,
    QUARANTINE_DIR,
    hour_start_ns,
    parquet_shape_problem,
    superseded,
)
from ..errors import UserError
from ..parse.zones import local_zone, valid_zone

log = logging.getLogger("ranklog.query")
# (path, size) → why the file is not Parquet, or None: visible files never change (names are never
# reused), so each is looked at once per process (the archive server answers many queries)
_SHAPES: dict[tuple[str, int], str | None] = {}
_WARNED: set[str] = set()

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.fs as pafs

    from ..object_store import S3Settings



@dataclass(frozen=True)
class DataFile:
    """One visible Parquet file of the archive and the hour partition it belongs to."""

    path: str  # path inside the source's filesystem
    date: str  # YYYY-MM-DD
    hour: int
    size: int

    @property
    def partition(self) -> tuple[str, int]:
        return (self.date, self.hour)

    @property
    def archive_id(self) -> str:
        """The writer's id: the file name up to its last ``-`` (``<archive-id>-<seq>.parquet``)."""
        name = self.path.rsplit("/", 1)[-1].removesuffix(".parquet")
        return name.rsplit("-", 1)[0] if "-" in name else name

    @property
    def start_ns(self) -> int:
        return hour_start_ns(self.date, self.hour)


def _visible(name: str) -> bool:
    return not name.startswith((".", "_"))


@dataclass(frozen=True)
class _Entry:
    """The part of pyarrow.fs.FileInfo that listing needs (os.scandir is ~10x faster locally)."""

    path: str
    base_name: str
    type: Any
    size: int | None


def _scandir(path: str, label: str) -> list[_Entry]:
    import pyarrow.fs as pafs

    try:
        with os.scandir(path) as entries:
            out = []
            for entry in entries:
                if entry.is_dir():
                    out.append(_Entry(entry.path, entry.name, pafs.FileType.Directory, None))
                elif entry.is_file():
                    out.append(_Entry(entry.path, entry.name, pafs.FileType.File, entry.stat().st_size))
            return out
    except FileNotFoundError:
        return []  # removed by retention or compaction while listing
    except PermissionError:
        raise UserError(f"archive {label}: permission denied reading {path}") from None
    except OSError as exc:
        raise UserError(f"archive {label}: cannot list {path}: {exc.strerror}") from None


class ArchiveSource:
    """A hive-partitioned archive root on any pyarrow filesystem (local directory, s3://, gs://…)."""

    kind = "archive"
    # Where the engine's per-file work runs: None is this process; the CLI's ``--engine ray`` sets a
    # :class:`ranklog.query.ray_engine.RayRunner`.
    runner: Any = None

    def __init__(self, filesystem: pafs.FileSystem, root: str, label: str | None = None) -> None:
        self.filesystem = filesystem
        self.root = root.rstrip("/") or "/"
        self.label = label or root
        self.unreadable: dict[str, str] = {}  # files skipped by this source's reads: path → why

    def skip_unreadable(self, path: str, why: str) -> None:
        """Leave `path` out of every later listing, with a warning naming it (once per process)."""
        self.unreadable[path] = why
        if path not in _WARNED:
            _WARNED.add(path)
            log.warning("skipping unreadable Parquet file %s (%s); the archive's compaction moves it aside, "
                        "`ranklog integrity` reports it", path, why)

    def _shape_problem(self, path: str, size: int) -> str | None:
        """Why a listed file cannot be Parquet (archive_layout.parquet_shape_problem). Read from local
        files; an object store writes objects whole, so there only its size is judged and damage inside
        one shows when it is read (engine) or compacted."""
        if path in self.unreadable:
            return self.unreadable[path]
        if self.local_root is None:
            return parquet_shape_problem(size, b"PAR1", b"\0\0\0\0PAR1") if size < 12 else None
        key = (path, size)
        if key not in _SHAPES:
            if len(_SHAPES) > 200_000:
                _SHAPES.clear()
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            except OSError:
                return None  # gone (compaction, retention): the scan relists
            try:
                _SHAPES[key] = parquet_shape_problem(size, os.pread(fd, 4, 0), os.pread(fd, 8, max(0, size - 8)))
            finally:
                os.close(fd)
        return _SHAPES[key]

    @classmethod
    def open(cls, location: str, s3: S3Settings | None = None) -> ArchiveSource:
        """A local directory or an object-store URI (``s3://bucket/prefix``: endpoint and credentials
        from `s3`, then the AWS variables and files, see :mod:`ranklog.object_store`)."""
        import pyarrow.fs as pafs

        from ..object_store import StoreConfigError, is_uri, open_root

        if not is_uri(location):
            if not os.path.isdir(location):
                raise UserError(f"archive {location}: no such directory{_url_hint(location)}")
            if not os.access(location, os.R_OK | os.X_OK):
                raise UserError(f"archive {location}: permission denied")
            if not holds_partitions(location) and looks_like_log_dir(location):
                raise UserError(f"{location} is a raw log folder, not an archive (it holds log files and no "
                                f"date=…/hour=… partitions): read it with --log_dir {location}")
        try:
            filesystem, root = open_root(location, s3)
            info = filesystem.get_file_info(root)
        except StoreConfigError as exc:
            raise UserError(f"cannot open archive {location}: {exc}") from None
        except OSError as exc:  # unreachable endpoint, refused credentials, missing bucket
            raise UserError(f"cannot open archive {location}: {str(exc).splitlines()[0]}") from None
        source = cls(filesystem, root, location)
        if info.type == pafs.FileType.NotFound and is_uri(location):
            return source  # an object-store prefix exists once something is written under it
        if info.type != pafs.FileType.Directory:
            raise UserError(f"archive {location}: not a directory")
        return source

    @property
    def local_root(self) -> str | None:
        """The root as a local path when the archive is on this machine's filesystem."""
        import pyarrow.fs as pafs

        return self.root if isinstance(self.filesystem, pafs.LocalFileSystem) else None

    def _list(self, path: str) -> list[Any]:
        import pyarrow.fs as pafs

        if self.local_root is not None:
            return _scandir(path, self.label)
        try:
            return self.filesystem.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        except PermissionError:
            raise UserError(f"archive {self.label}: permission denied reading {path}") from None
        except OSError as exc:
            raise UserError(f"archive {self.label}: cannot list {path}: {exc}") from None

    def list_files(self, start_ns: int | None = None, end_ns: int | None = None) -> list[DataFile]:
        """Visible Parquet files whose hour partition overlaps [start_ns, end_ns), in time order."""
        import pyarrow.fs as pafs

        files: list[DataFile] = []
        for day in self._list(self.root):
            match = DATE_DIR.match(day.base_name)
            if day.type != pafs.FileType.Directory or not match:
                continue
            date = match.group(1)
            day_start = hour_start_ns(date, 0)
            if (end_ns is not None and day_start >= end_ns) or (
                    start_ns is not None and day_start + DAY_NS <= start_ns):
                continue
            for hour_dir in self._list(day.path):
                hour_match = HOUR_DIR.match(hour_dir.base_name)
                if hour_dir.type != pafs.FileType.Directory or not hour_match:
                    continue
                hour = int(hour_match.group(1))
                begin = day_start + hour * HOUR_NS
                if (end_ns is not None and begin >= end_ns) or (start_ns is not None and begin + HOUR_NS <= start_ns):
                    continue
                entries = self._list(hour_dir.path)
                hour_files = [entry for entry in entries if entry.type == pafs.FileType.File
                              and entry.base_name.endswith(".parquet") and _visible(entry.base_name)]
                hidden = self._superseded(hour_dir.path, entries, hour_files)
                for entry in hour_files:
                    if entry.base_name in hidden:
                        continue
                    problem = self._shape_problem(entry.path, entry.size or 0)
                    if problem is not None:
                        self.skip_unreadable(entry.path, problem)
                        continue
                    files.append(DataFile(entry.path, date, hour, entry.size or 0))
        files.sort(key=lambda f: (f.date, f.hour, f.path))
        return files

    def quarantined(self) -> list[tuple[str, int]]:
        """(path, size) of the files the archive moved aside as unreadable (archive_layout.QUARANTINE_DIR)."""
        import pyarrow.fs as pafs

        try:
            found = self.filesystem.get_file_info(pafs.FileSelector(f"{self.root}/{QUARANTINE_DIR}", recursive=True,
                                                                    allow_not_found=True))
        except OSError:
            return []
        return sorted((info.path, info.size or 0) for info in found if info.type == pafs.FileType.File)

    def _superseded(self, directory: str, entries: list[Any], hour_files: list[Any]) -> set[str]:
        """Inputs of a compaction the hour's lease says is committed (archive_layout.superseded): read
        only when the hour has a lease and more than one file, i.e. while a replacement is finishing."""
        if len(hour_files) < 2 or not any(entry.base_name == LEASE_NAME for entry in entries):
            return set()
        try:
            with self.filesystem.open_input_stream(f"{directory}/{LEASE_NAME}") as stream:
                lease = json.loads(stream.read())
        except (FileNotFoundError, ValueError):
            return set()
        return superseded(lease if isinstance(lease, dict) else {}, {entry.base_name for entry in hour_files})

    def describe(self) -> str:
        return f"archive {self.label}"


def _url_hint(location: str) -> str:
    """`; did you mean http://HOST:PORT?` for an --archive value that reads as an address."""
    import re

    if re.fullmatch(r"(\[[0-9a-fA-F:]+\]|[\w.-]+):\d{1,5}(/.*)?", location):
        return f" (did you mean http://{location} for a running archive?)"
    return ""


def holds_partitions(path: str) -> bool:
    """Whether a local directory has the archive's ``date=YYYY-MM-DD`` partitions at its top."""
    try:
        with os.scandir(path) as entries:
            return any(DATE_DIR.match(entry.name) and entry.is_dir() for entry in entries)
    except OSError:
        return False


def looks_like_log_dir(path: str, budget: int = 2000) -> bool:
    """Whether a walk of at most `budget` entries under `path` meets a log file ranklog recognises."""
    from ..parse.detection import detect

    seen = 0
    for root, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        for name in names:
            seen += 1
            if detect(os.path.join(root, name)) is not None:
                return True
            if seen >= budget:
                return False
    return False


class LogDirSource:
    """A raw log directory, parsed with the agent's format recognition (no service needed)."""

    kind = "log_dir"

    def __init__(self, path: str, progress: bool = False, timezone: str | None = None) -> None:
        if not os.path.exists(path):
            raise UserError(f"log directory {path}: no such directory")
        if not os.path.isdir(path):
            raise UserError(f"log directory {path}: not a directory")
        if not os.access(path, os.R_OK | os.X_OK):
            raise UserError(f"log directory {path}: permission denied")
        if holds_partitions(path):
            raise UserError(f"{path} is an archive root (date=…/hour=… partitions of Parquet), not a raw log "
                            f"folder: read it with --archive {path}")
        self.path = path
        # Parsed with its real path, so `source` is the same however the directory was named
        # (./logs, a symlink) and matches what an agent reading the same files records.
        self.real_path = os.path.realpath(path)
        self.progress = progress
        self.timezone = timezone  # of times printed without one (None: this machine's)

    def tables(self) -> Iterator[pa.Table]:
        """Parsed records, one table (or batch) per file or chunk, as the parsers produce them."""
        import pyarrow as pa

        from ..parse.directory import iter_log_dir

        with _progress_callback(self.progress, f"reading {self.path}") as progress:
            for item in iter_log_dir(self.real_path, progress=progress, timezone=self.timezone):
                yield item if isinstance(item, pa.Table) else pa.Table.from_batches([item])

    def describe(self) -> str:
        return f"log directory {self.path}"


class _NoProgress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


class _RichProgress:
    """A rich progress bar fed by the parser's ``progress(done, total)`` callback."""

    def __init__(self, label: str) -> None:
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

        self._progress = Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                                  TimeRemainingColumn(), transient=True)
        self._task = self._progress.add_task(label, total=None)

    def __enter__(self) -> Callable[..., None]:
        self._progress.start()

        def update(done: int, total: int | None = None, *_: Any) -> None:
            self._progress.update(self._task, completed=done, total=total)

        return update

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()


def _progress_callback(enabled: bool, label: str) -> Any:
    return _RichProgress(label) if enabled else _NoProgress()


def read_token(token_file: str | None) -> str | None:
    """The first non-empty line of a token file (the agent's convention), or $RANKLOG_TOKEN."""
    if token_file is None:
        return os.environ.get("RANKLOG_TOKEN") or None
    try:
        with open(token_file, encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    return line.strip()
    except OSError as exc:
        raise UserError(f"token file {token_file}: {exc.strerror}") from None
    raise UserError(f"token file {token_file}: empty")


def open_source(archive: str | None = None, log_dir: str | None = None, token_file: str | None = None,
                progress: bool = False, timezone: str | None = None) -> Any:
    """The source named by ``--archive DIR|URI|URL`` or ``--log_dir DIR`` (exactly one of them);
    `timezone`: a log directory's zone for times printed without one (``--tz``)."""
    if bool(archive) == bool(log_dir):
        raise UserError("give exactly one of --archive DIR|URL or --log_dir DIR")
    if timezone is not None and timezone.lower() == "local":
        timezone = local_zone()
    if timezone is not None and not valid_zone(timezone):
        raise UserError(f"--tz: {timezone!r} is not a time zone (an IANA name such as Europe/Berlin, UTC, or +01:00)")
    if log_dir:
        return LogDirSource(log_dir, progress=progress, timezone=timezone)
    assert archive is not None
    if archive.startswith(("http://", "https://")):
        from .remote import RemoteSource

        return RemoteSource(archive, read_token(token_file))
    return ArchiveSource.open(archive)
