"""The set of tracked files: what discovery found, reconciled with identity, rotation and checkpoints.

Decisions, in order, for every poll:

- A tracked file whose path is gone or now names another inode was *rotated* (renamed) or deleted: it
  stays open and is read to its end, then let go once all of it is acknowledged and it has been
  quiet for ``rotate_grace`` seconds. If discovery finds its inode under a new matching name, it
  is simply followed (rename).
- A tracked file whose size fell below what was read, or whose head bytes changed, was *truncated*
  (copytruncate): the bytes read so far finish shipping under the old source_id, the file starts
  over from offset 0 as a new generation (new source_id). Bytes seen in the file but never read
  are counted in ``ranklog_agent_lost_bytes_total{reason="truncated"}``.
- At start, each checkpointed file is found again by device+inode (at its path, or renamed in the
  same directory), verified by its head checksum, and resumed at its acknowledged offset. A file
  that is gone, or whose inode now holds other bytes, lost its unacknowledged tail: counted in
  ``ranklog_agent_lost_bytes_total{reason="deleted"}`` with a WARNING.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from .. import parse
from ..file_identity import FileIdentity, head_matches
from .acks import Watermark
from .agent_config import SourceSpec
from .checkpoint import FileCheckpoint
from .chunk import Chunk
from .discover import Opened
from .tracked_file import TrackedFile, resolve_format

log = logging.getLogger("ranklog.agent.tail")


def _open(path: str) -> tuple[int, os.stat_result] | None:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    return fd, os.fstat(fd)


class FileTracker:
    def __init__(self, cfg, metrics) -> None:
        self.cfg = cfg
        self.metrics = metrics
        self.files: list[TrackedFile] = []  # every tracked file, retired generations included
        self.by_key: dict[str, TrackedFile] = {}
        # (dev, inode) → the live file holding it; stable because every tracked file stays open.
        self._inodes: dict[tuple[int, int], TrackedFile] = {}
        self.dirty = False  # checkpoint content changed
        self.urgent = False  # a new generation must be recorded before its first byte ships

    # --- lookups ----------------------------------------------------------------------------

    def _live(self) -> list[TrackedFile]:
        return [tf for tf in self.files if not tf.retired]

    def _by_inode(self, dev: int, ino: int) -> TrackedFile | None:
        tf = self._inodes.get((dev, ino))
        return tf if tf is not None and not tf.retired else None

    # --- startup ------------------------------------------------------------------------------

    def resume(self, entries: dict[str, FileCheckpoint], specs: dict[str, SourceSpec]) -> None:
        """Re-open every checkpointed file that still exists; count what vanished."""
        for entry in entries.values():
            ident = FileIdentity(entry.dev, entry.ino, entry.head_len, entry.head_hash)
            found = self._find_again(entry, ident)
            if found is None:
                self._count_lost(entry.path, entry.last_size - entry.offset, "deleted")
                self.dirty = True
                continue
            path, fd, st = found
            fmt, fields = resolve_format(path, entry.format)
            tf = TrackedFile(path=path, fd=fd, format=fmt, fields=fields,
                             options=dict(specs[path].options) if path in specs else {}, generation=entry.generation)
            tf.ident, tf.key = ident, entry.source_id
            tf.ctx = parse.SourceContext(source=path, source_id=entry.source_id, format=fmt, host=self.cfg.host,
                                         ip=self.cfg.ip, fields=dict(fields), state=dict(entry.parser_state),
                                              options=dict(tf.options))
            tf.read_offset = tf.parse_offset = entry.offset
            tf.watermark = Watermark(entry.offset, dict(entry.parser_state))
            tf.note_size(st.st_size, time.time())
            tf.detached = path != entry.path and path not in specs
            self._add(tf)
            if st.st_size < entry.offset:
                self._count_lost(path, entry.last_size - entry.offset, "truncated")
                self._restart_generation(tf)
            log.info("resuming %s at offset %d (%s)", path, entry.offset, entry.source_id)

    def _find_again(self, entry: FileCheckpoint, ident: FileIdentity) -> tuple[str, int, os.stat_result] | None:
        candidates = [entry.path]
        directory = os.path.dirname(entry.path)
        try:
            with os.scandir(directory) as it:
                candidates += [e.path for e in it if e.inode() == entry.ino and e.path != entry.path]
        except OSError:
            pass
        for path in candidates:
            opened = _open(path)
            if opened is None:
                continue
            fd, st = opened
            if ident.same_inode(st) and head_matches(fd, ident):
                return path, fd, st
            os.close(fd)
        return None

    # --- polling --------------------------------------------------------------------------------

    def poll(self, found: dict[str, SourceSpec], opened: list[Opened]) -> list[Chunk]:
        """Reconcile with discovery; returns chunks flushed from files that were truncated."""
        chunks: list[Chunk] = []
        now = time.monotonic()
        for tf in self._live():
            chunks += self._check(tf)
        for item in opened:
            self._adopt(item, found)
        live_paths = {tf.path for tf in self._live() if not tf.detached}
        for path in found:
            if path not in live_paths:
                self._follow_rename(path)
        for tf in self._live():
            self._identify(tf)
        self._let_go(now)
        return chunks

    def _identify(self, tf: TrackedFile) -> None:
        if tf.key is None and tf.identify(self.cfg.host, self.cfg.ip):
            self.by_key[tf.key] = tf
            self.dirty = True
            log.info("tailing %s as %s (%s)", tf.path, tf.format, tf.key)
            if tf.generation > 1:
                self.urgent = True  # recorded before the new generation's first byte ships

    def _check(self, tf: TrackedFile) -> list[Chunk]:
        st = os.fstat(tf.fd)
        if not tf.detached:
            try:
                at_path = os.stat(tf.path)
                moved = not (at_path.st_dev == st.st_dev and at_path.st_ino == st.st_ino)
            except FileNotFoundError:
                moved = True
            if moved:
                tf.detached = True
                log.info("%s was rotated or removed; reading it to the end", tf.path)
        if st.st_size < tf.read_offset or (tf.ident is not None and not head_matches(tf.fd, tf.ident)):
            return self.truncated(tf)
        if st.st_size != tf.size:
            tf.note_size(st.st_size, time.time())
            self.dirty = True
        return []

    def truncated(self, tf: TrackedFile) -> list[Chunk]:
        """Finish the old generation from memory, start the file over as a new generation.

        Bytes the last poll saw beyond what was read are counted as lost; what was written and
        truncated between two polls without being seen cannot be known (a lower bound, documented).
        """
        self._count_lost(tf.path, tf.size - tf.read_offset, "truncated")
        chunk, _ = tf.flush_pending()
        log.info("%s was truncated at offset %d; starting over as generation %d",
                 tf.path, tf.read_offset, tf.generation + 1)
        tf.retired = True
        fresh = TrackedFile(path=tf.path, fd=os.dup(tf.fd), format=tf.format, fields=dict(tf.fields),
                            options=dict(tf.options), generation=tf.generation + 1, detached=tf.detached)
        self._add(fresh)
        self._identify(fresh)
        self.dirty = True
        return [chunk] if chunk is not None else []

    def _restart_generation(self, tf: TrackedFile) -> None:
        """At start: a checkpointed file is shorter than its acknowledged offset."""
        self.files.remove(tf)
        self.by_key.pop(tf.key, None)
        self._inodes.pop(tf.inode, None)
        fresh = TrackedFile(path=tf.path, fd=tf.fd, format=tf.format, fields=tf.fields, options=tf.options,
                            generation=tf.generation + 1, detached=tf.detached)
        self._add(fresh)

    def _adopt(self, item: Opened, found: dict[str, SourceSpec]) -> None:
        """A file discovery opened: a new file, or one already tracked (then the extra descriptor goes)."""
        known = self._by_inode(item.st.st_dev, item.st.st_ino)
        if known is not None:
            os.close(item.fd)
            if known.detached and item.path in found:
                self._follow(known, item.path)
            return
        fields: dict[str, Any] = {}
        if item.spec.format != "auto":
            _, fields = resolve_format(item.path, item.spec.format)
        self._add(TrackedFile(path=item.path, fd=item.fd, format=item.spec.format, fields=fields,
                              options=dict(item.spec.options)))

    def _follow_rename(self, path: str) -> None:
        try:
            st = os.stat(path)
        except OSError:
            return
        known = self._by_inode(st.st_dev, st.st_ino)
        if known is not None and known.detached:
            self._follow(known, path)

    def _follow(self, tf: TrackedFile, path: str) -> None:
        log.info("%s was renamed to %s; following it", tf.path, path)
        tf.path, tf.detached = path, False
        self.dirty = True

    def _add(self, tf: TrackedFile) -> None:
        self.files.append(tf)
        st = os.fstat(tf.fd)
        tf.inode = (st.st_dev, st.st_ino)
        self._inodes[tf.inode] = tf
        if tf.key is not None:
            self.by_key[tf.key] = tf

    def _let_go(self, now: float) -> None:
        for tf in list(self.files):
            done = tf.retired and tf.watermark.pending == 0 and not tf.carry
            done = done or (tf.detached and tf.key is not None and tf.drained and tf.read_offset >= tf.size
                            and now - tf.last_data >= self.cfg.rotate_grace)
            done = done or (tf.detached and tf.key is None and now - tf.last_data >= self.cfg.rotate_grace)
            if done:
                self.files.remove(tf)
                if tf.key is not None and self.by_key.get(tf.key) is tf:
                    del self.by_key[tf.key]
                if self._inodes.get(tf.inode) is tf:
                    del self._inodes[tf.inode]
                tf.close()
                self.dirty = True

    def _count_lost(self, path: str, nbytes: int, reason: str) -> None:
        if nbytes <= 0:
            return
        self.metrics.agent_lost_bytes.labels(reason=reason).inc(nbytes)
        log.warning("%d bytes of %s were %s before they were shipped", nbytes, path, reason)

    # --- acknowledgements, checkpoints, gauges ----------------------------------------------------

    def acked(self, chunk: Chunk) -> None:
        tf = self.by_key.get(chunk.key)
        if tf is not None and tf.watermark.ack(chunk):
            self.dirty = True

    def checkpoints(self) -> dict[str, FileCheckpoint]:
        out: dict[str, FileCheckpoint] = {}
        for tf in self.files:
            if tf.key is None or tf.ident is None:
                continue
            out[tf.key] = FileCheckpoint(
                source_id=tf.key, path=tf.path, dev=tf.ident.dev, ino=tf.ident.ino, head_len=tf.ident.head_len,
                head_hash=tf.ident.head_hash, generation=tf.generation, offset=tf.watermark.offset,
                parser_state=tf.watermark.state, format=tf.format, last_size=max(tf.size, tf.read_offset))
        return out

    def backlog(self) -> tuple[int, float]:
        """(bytes written but not acknowledged, age in seconds of the oldest such byte)."""
        now = time.time()
        total, age = 0, 0.0
        for tf in self.files:
            end = tf.read_offset if tf.retired else max(tf.size, tf.read_offset)
            total += max(0, end - tf.watermark.offset)
            age = max(age, tf.unshipped_age(now, end))
        return total, age

    def close(self) -> None:
        for tf in self.files:
            tf.close()

    def stats(self) -> dict[str, Any]:
        return {"files": len(self._live())}
