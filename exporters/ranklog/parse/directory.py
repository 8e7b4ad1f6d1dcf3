"""Reading a whole raw log directory (a copied Ray ``logs/`` folder, a torchrun ``--log-dir`` tree, a
folder of ranklog files, or a mix) as records — what ``ranklog query/triage --log_dir`` run on.
A folder of per-node torchrun ``--log-dir`` folders names the nodes (see :func:`list_log_files`).

Every regular file that :func:`ranklog.parse.detect` recognises is parsed to its end (``final=True``
at EOF, in bounded chunks so a multi-GB file never sits in memory whole). Host: the record's own
when it carries one, else the layout's (``<job>/<host>/rank-…``), else ``unknown`` — a copied folder
says nothing reliable about the machine that wrote it, and the reading machine's name would be
wrong. ``source_id`` is the agent's identity (:func:`ranklog.file_identity.make_source_id`: host,
device, inode, head checksum), so records read here and records shipped by an agent from the same
file carry the same key. Unreadable files are skipped with a warning; an unreadable directory is a
:class:`~ranklog.errors.UserError`.

Identity: every file is parsed first, then the rules of :mod:`ranklog.source_identity` lend rank,
role, pid and node across the files (a Ray worker's ``.out`` takes the rank its ``.err`` names, a
torchrun rank file the global rank its launcher's console pairs with its local rank), so a record
comes out with everything the folder says about its writer, as an archive answers for the same
files. The parsed batches are held until then, up to :data:`HOLD_BYTES`; a larger folder is parsed
twice (the first pass keeps only the identities), so memory stays bounded.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import PurePath

import pyarrow as pa

from ranklog.errors import UserError
from ranklog.file_identity import identify, make_source_id
from ranklog.record import arrow_schema
from ranklog.source_identity import fill, lend, merge_observations, observe

from . import parse, zones
from .contract import Detected, SourceContext
from .detection import detect

CHUNK_BYTES = 8 * 1024 * 1024
HOLD_BYTES = 1024 * 1024 * 1024  # parsed batches held for the identity join (beyond: parsed twice)
Progress = Callable[[int, int], None]
_log = logging.getLogger(__name__)


def iter_log_dir(path: str, *, progress: Progress | None = None, timezone: str | None = None) -> Iterator[pa.RecordBatch]:
    """Record batches of every recognised file under `path`, file by file in path order.

    `progress(done_bytes, total_bytes)` is called after each chunk. `timezone`: the zone of times
    printed without one (default: this machine's, :func:`ranklog.parse.zones.local_zone`; a folder
    copied from a machine in another zone needs its zone).
    """
    options = folder_options(timezone)
    files = list_log_files(path)
    total = sum(size for _, _, size in files)
    finished = 0  # bytes of the files already read
    read_time_ns = time.time_ns()
    held: list[pa.RecordBatch] | None = []
    held_bytes = 0
    observations = []
    for file_path, detected, size in files:
        done = finished
        for batch, nbytes in _parse_file(file_path, detected, read_time_ns, options):
            done += nbytes
            if progress is not None:
                progress(min(done, total), total)
            if batch.num_rows:
                observations.append(observe(batch))
                if held is not None:
                    held.append(batch)
                    held_bytes += batch.nbytes
                    if held_bytes > HOLD_BYTES:
                        held = None
        finished += size
    if progress is not None:
        progress(total, total)
    lent = lend(merge_observations(observations))
    if held is None:
        held = (batch for file_path, detected, _ in files
                for batch, _ in _parse_file(file_path, detected, read_time_ns) if batch.num_rows)
    for batch in held:
        yield fill(batch, lent)


def read_log_dir(path: str, timezone: str | None = None) -> pa.Table:
    """Every record of the directory as one table (see :func:`iter_log_dir`)."""
    return pa.Table.from_batches(list(iter_log_dir(path, timezone=timezone)), schema=arrow_schema())


def list_log_files(path: str) -> list[tuple[str, object, int]]:
    """(path, Detected, size) of every recognised regular file, sorted by path.

    Files under a torchrun ``--log-dir`` that sits in a subfolder of `path` take that folder's name
    as their host (multi-node runs are collected as ``--log-dir logs/$(hostname)``, one folder per
    node), unless the layout names the host itself.
    """
    _check_dir(path)
    found = []

    def on_error(exc: OSError) -> None:
        _log.warning("skipping %s: %s", exc.filename, exc.strerror)

    for root, dirs, names in os.walk(path, onerror=on_error):
        dirs.sort()
        for name in sorted(names):
            file_path = os.path.join(root, name)
            try:
                if not os.path.isfile(file_path):
                    continue
                size = os.path.getsize(file_path)
            except OSError:
                continue
            detected = detect(file_path)
            if detected is not None:
                found.append((file_path, detected, size))
    return _hosts_from_node_folders(path, found)


def _hosts_from_node_folders(root: str, found: list[tuple[str, object, int]]) -> list[tuple[str, object, int]]:
    """Lend the node folder's name (the parent of a torchrun run folder below `root`) as host."""
    root = os.path.abspath(root)
    node_dirs = set()
    for file_path, detected, _ in found:
        if detected.format.startswith("torchrun") and "attempt" in detected.fields:
            parts = PurePath(os.path.abspath(file_path)).parts
            at = next(i for i in range(len(parts) - 1, -1, -1) if parts[i] == f"attempt_{detected.fields['attempt']}")
            node_dir = os.path.join(*parts[:at - 1])
            if node_dir != root and node_dir.startswith(root + os.sep):
                node_dirs.add(node_dir + os.sep)
    if not node_dirs:
        return found
    out = []
    for file_path, detected, size in found:
        node = next((d for d in node_dirs if os.path.abspath(file_path).startswith(d)), None)
        if node is not None and not detected.fields.get("host"):
            detected = Detected(detected.format, {**detected.fields, "host": os.path.basename(node[:-1])})
        out.append((file_path, detected, size))
    return out


def _check_dir(path: str) -> None:
    # os.stat, not os.path.exists: a parent the user may not search must read as "permission
    # denied", not as a missing directory.
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise UserError(f"log directory {path}: no such directory") from None
    except OSError as exc:
        raise UserError(f"log directory {path}: cannot read it ({exc.strerror})") from None
    if not stat.S_ISDIR(mode):
        raise UserError(f"log directory {path}: not a directory")
    try:
        os.listdir(path)
    except OSError as exc:
        raise UserError(f"log directory {path}: cannot read it ({exc.strerror})") from None


def _parse_file(file_path: str, detected, read_time_ns: int, options: dict) -> Iterator[tuple[pa.RecordBatch, int]]:
    try:
        fd = os.open(file_path, os.O_RDONLY)
    except OSError as exc:
        _log.warning("skipping %s: %s", file_path, exc.strerror)
        return
    try:
        ctx = file_context(fd, file_path, detected, options)
        if ctx is None:  # empty file
            return
        offset, carry = 0, b""
        with os.fdopen(os.dup(fd), "rb") as handle:
            while True:
                block = handle.read(CHUNK_BYTES)
                data = carry + block
                final = not block
                if not data:
                    return
                result = parse(data, offset, ctx, final=final, read_time_ns=read_time_ns)
                offset += result.consumed
                carry = data[result.consumed:]
                yield result.batch, len(block)
                if final:
                    return
    except OSError as exc:
        _log.warning("stopped reading %s: %s", file_path, exc.strerror)
    finally:
        os.close(fd)


def folder_options(timezone: str | None = None) -> dict:
    """The source options of a folder's files: the zone of their times printed without one (`timezone`,
    else this machine's)."""
    return {zones.OPTION: timezone or zones.local_zone()}


def file_context(fd: int, file_path: str, detected: Detected, options: dict | None = None) -> SourceContext | None:
    """The parse context of an open file as this module reads it (None while the file is empty);
    `options`: the source options of the folder's files (its time zone)."""
    source_id = _source_id(fd, detected.fields.get("host") or "unknown", file_path)
    if source_id is None:
        return None
    fields = {k: v for k, v in detected.fields.items() if k != "host"}
    return SourceContext(source=file_path, source_id=source_id, format=detected.format,
                         host=detected.fields.get("host") or "unknown", ip="unknown", fields=fields,
                         options=dict(options or {}), mtime_ns=os.fstat(fd).st_mtime_ns)


def _source_id(fd: int, host: str, file_path: str) -> str | None:
    """The agent's source id for this file (same key as when an agent ships it)."""
    ident = identify(fd, os.fstat(fd))
    return None if ident is None else make_source_id(host, ident)
