"""Checkpoints: how far each file has been acknowledged by an archive, written atomically.

One JSON document, ``<state_dir>/checkpoints.json``, replaced by temp file + fsync + rename (+ fsync
of the directory), so a crash leaves either the old or the new version, never a torn one. The
offsets in it only ever come from acknowledged batches; re-sending from them after a crash is safe
because the archive deduplicates by (source_id, offset).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

VERSION = 1


@dataclass
class FileCheckpoint:
    source_id: str
    path: str
    dev: int
    ino: int
    head_len: int
    head_hash: str
    generation: int = 1
    offset: int = 0  # acknowledged: every byte before it is durable in an archive
    parser_state: dict[str, Any] = field(default_factory=dict)  # parser state at `offset`
    format: str = "auto"
    last_size: int = 0  # size last seen, to count lost bytes if the file vanishes while we are down
    btime_ns: int = 0  # the file's birth time (0: unknown), file_identity.birth_time_ns
    check_len: int = 0  # acknowledged bytes `check_hash` covers (file_identity.CHECK_BYTES at most)
    check_hash: str = ""


class CheckpointStore:
    """Loads and atomically saves the checkpoint of every tracked file, keyed by source_id."""

    def __init__(self, state_dir: str | os.PathLike[str]) -> None:
        self.dir = Path(state_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "checkpoints.json"

    def load(self) -> dict[str, FileCheckpoint]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise ValueError(f"state_dir: checkpoint file {self.path} is unreadable: {exc}") from None
        known = set(FileCheckpoint.__dataclass_fields__)
        out = {}
        for item in data.get("files", []):
            entry = FileCheckpoint(**{k: v for k, v in item.items() if k in known})
            out[entry.source_id] = entry
        return out

    def save(self, entries: dict[str, FileCheckpoint]) -> None:
        payload = json.dumps({"version": VERSION, "files": [asdict(e) for e in entries.values()]},
                             separators=(",", ":")).encode()
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(payload)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dir_fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class CheckpointWriter:
    """Writes checkpoints off the reading thread: an fsync can take tens of milliseconds on a busy disk.

    ``submit`` hands over the newest snapshot (older unwritten ones are superseded); ``save_now``
    writes synchronously (a new file generation must be on disk before its first byte ships). Each
    snapshot carries a sequence number and a write never replaces a newer one.
    """

    def __init__(self, store: CheckpointStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._pending: tuple[int, dict[str, FileCheckpoint]] | None = None
        self._written = 0
        self._seq = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ranklog-checkpoint", daemon=True)
        self._thread.start()

    def submit(self, entries: dict[str, FileCheckpoint]) -> None:
        self._seq += 1
        self._pending = (self._seq, entries)
        self._wake.set()

    def save_now(self, entries: dict[str, FileCheckpoint]) -> None:
        self._seq += 1
        self._write(self._seq, entries)

    def close(self, entries: dict[str, FileCheckpoint]) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(10)
        self.save_now(entries)

    def _write(self, seq: int, entries: dict[str, FileCheckpoint]) -> None:
        with self._lock:
            if seq > self._written:
                self.store.save(entries)
                self._written = seq

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            pending, self._pending = self._pending, None
            if pending is not None:
                try:
                    self._write(*pending)
                except OSError as exc:
                    logging.getLogger("ranklog.agent").error("cannot write checkpoint %s: %s", self.store.path, exc)
