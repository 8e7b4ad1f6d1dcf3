"""The set of tracked files: what discovery found, reconciled with identity, rotation and checkpoints.

Decisions, in order, for every poll:

- A tracked file whose path is gone or now names another inode was *rotated* (renamed) or deleted: it
  stays open and is read to its end, then let go once all of it is acknowledged and it has been
  quiet for ``rotate_grace`` seconds. If discovery finds its inode under a new matching name, it
  is simply followed (rename).
- A tracked file whose size fell below what was read, or whose head bytes changed, was *truncated*
  (copytruncate): the file starts over from offset 0 as a new generation (new source_id). The old
  generation finishes from the **copy** when one sits beside the file (a name starting with the
  file's name, same head bytes, at least as long as what was read — logrotate's ``app.log.1``): its
  unread tail is read from the copy under the old source_id, so nothing the copy kept is lost.
  What is lost is what the agent saw in the file beyond what the copy (or, without a copy, its own
  read offset) holds — lines written between the copy and the truncate, or the unread tail when no
  copy is found. It is counted in ``ranklog_agent_lost_bytes_total{reason="truncated"}``, logged,
  and shipped as a WARNING record of the old source (``attrs.ranklog_lost_bytes``, at the offset
  where the loss starts) that ``ranklog integrity`` reports. Bytes written and truncated between
  two looks of the agent cannot be known: the count is a lower bound. The notice is shipped at most
  once (it is not in the checkpoint): an agent killed before its acknowledgement keeps only the
  metric and the log line.
- At start, each checkpointed file is found again by device+inode (at its path, or renamed in the
  same directory), verified by its head checksum, and resumed at its acknowledged offset. A file
  that is gone, or whose inode now holds other bytes, lost its unacknowledged tail: counted in
  ``ranklog_agent_lost_bytes_total{reason="deleted"}`` with a WARNING.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from .. import parse
from ..file_identity import CHECK_BYTES, HEAD_BYTES, FileIdentity, birth_time_ns, head_matches, prefix_hash
from ..record import rows_to_table
from .acks import Watermark
from .agent_config import SourceSpec
from .checkpoint import FileCheckpoint
from .chunk import Chunk
from .discover import COMPRESSED_SUFFIXES, Opened
from .io_guard import IoGuard, may_hang
from .open_file import NotAFile, open_regular
from .tracked_file import TrackedFile, resolve_format

log = logging.getLogger("ranklog.agent.tail")


class FileTracker:
    def __init__(self, cfg, metrics, report: Callable[[str, str, str], None] | None = None,
                 guard: IoGuard | None = None) -> None:
        self.cfg = cfg
        self.metrics = metrics
        self.report = report  # (path, reason, detail) of a path met here that cannot be read (discover)
        self.guard = guard  # runs the I/O of files on mounts that may hang (io_guard)
        self.parked: dict[str, FileCheckpoint] = {}  # checkpointed files on such mounts not found again yet
        self._reborn: dict[tuple[int, int], int] = {}  # (dev, inode) of a recreated file → its generation
        self._specs: dict[str, SourceSpec] = {}
        self.files: list[TrackedFile] = []  # every tracked file, retired generations included
        self.by_key: dict[str, TrackedFile] = {}
        # (dev, inode) → the live file holding it; stable because every tracked file stays open.
        self._inodes: dict[tuple[int, int], TrackedFile] = {}
        self.pooled = cfg.parse_workers > 1  # files are parsed by worker processes (.parse_pool)
        self.released: list[TrackedFile] = []  # let go since the last look (their parse workers forget them)
        self.dirty = False  # checkpoint content changed
        self.urgent = False  # a new generation must be recorded before its first byte ships
        self._starting = True  # until the first poll: files found now may have been shipped by a previous run

    # --- lookups ----------------------------------------------------------------------------

    def _open(self, path: str) -> tuple[int, os.stat_result] | None:
        """A regular file, opened without ever blocking (open_file); a FIFO, socket or device met where a
        rotation copy or a file found again could be is reported, not opened."""
        try:
            return open_regular(path)
        except NotAFile as exc:
            if self.report is not None:
                self.report(path, "not_a_file", f"{exc.kind} where the agent looked for a log file or its copy")
        except OSError:
            pass
        return None

    def _live(self) -> list[TrackedFile]:
        return [tf for tf in self.files if not tf.retired]

    def _by_inode(self, dev: int, ino: int) -> TrackedFile | None:
        tf = self._inodes.get((dev, ino))
        return tf if tf is not None and not tf.retired else None

    # --- startup ------------------------------------------------------------------------------

    def resume(self, entries: dict[str, FileCheckpoint], specs: dict[str, SourceSpec]) -> None:
        """Re-open every checkpointed file that still exists; count what vanished. A file on a mount that
        may hang (io_guard) is looked for off this thread: parked until its look returns (its checkpoint
        is kept meanwhile), so a dead mount cannot hold the agent's start."""
        self._specs = specs
        for entry in entries.values():
            ident = FileIdentity(entry.dev, entry.ino, entry.head_len, entry.head_hash)
            if self.guard is not None and may_hang(entry.dev):
                self.parked[entry.source_id] = entry
                continue
            self._resume_one(entry, self._find_again(entry, ident))

    def _unpark(self) -> None:
        for key, entry in list(self.parked.items()):
            ident = FileIdentity(entry.dev, entry.ino, entry.head_len, entry.head_hash)
            done, found = self.guard.call(hash(key), entry.path, "finding it again",
                                          lambda e=entry, i=ident: self._find_again(e, i, detect=True))
            if done:
                del self.parked[key]
                self._resume_one(entry, found)

    def _resume_one(self, entry: FileCheckpoint, found: tuple | None) -> None:
        if found is None:
            self._count_lost(entry.path, entry.last_size - entry.offset, "deleted")
            self.dirty = True
            return
        path, fd, st, *detected = found
        fmt, fields = detected[0] if detected else resolve_format(path, entry.format)
        specs = self._specs
        tf = TrackedFile(path=path, fd=fd, format=fmt, fields=fields,
                         options=dict(specs[path].options) if path in specs else {}, generation=entry.generation)
        tf.ident, tf.key = FileIdentity(entry.dev, entry.ino, entry.head_len, entry.head_hash), entry.source_id
        tf.ctx = parse.SourceContext(source=path, source_id=entry.source_id, format=fmt, host=self.cfg.host,
                                     ip=self.cfg.ip, fields=dict(fields), state=dict(entry.parser_state),
                                     options=dict(tf.options))
        tf.read_offset = tf.parse_offset = entry.offset
        tf.watermark = Watermark(entry.offset, dict(entry.parser_state))
        tf.btime_ns, tf.check_len, tf.check_hash = entry.btime_ns, entry.check_len, entry.check_hash
        tf.note_size(st.st_size, time.time())
        tf.resend_below = st.st_size
        tf.detached = path != entry.path and path not in specs
        self._add(tf)
        if st.st_size < entry.offset:
            self._count_lost(path, entry.last_size - entry.offset, "truncated")
            self._restart_generation(tf)
        log.info("resuming %s at offset %d (%s)", path, entry.offset, entry.source_id)

    def _find_again(self, entry: FileCheckpoint, ident: FileIdentity, detect: bool = False) -> tuple | None:
        """(path, fd, fstat[, (format, fields) when `detect`]) of the checkpointed file, or None."""
        candidates = [entry.path]
        directory = os.path.dirname(entry.path)
        try:
            with os.scandir(directory) as it:
                candidates += [e.path for e in it if e.inode() == entry.ino and e.path != entry.path]
        except OSError:
            pass
        for path in candidates:
            opened = self._open(path)
            if opened is None:
                continue
            fd, st = opened
            if ident.same_inode(st) and head_matches(fd, ident):
                if self._recreated(entry, fd, path):
                    os.close(fd)
                    return None  # a different file: discovery finds it, and it is read from byte 0
                return (path, fd, st, resolve_format(path, entry.format)) if detect else (path, fd, st)
            os.close(fd)
        return None

    def _recreated(self, entry: FileCheckpoint, fd: int, path: str) -> bool:
        """Same inode and head, but not the same file: another birth time, or other acknowledged bytes."""
        born = birth_time_ns(fd) if entry.btime_ns else 0
        why = None
        if born and born != entry.btime_ns:
            why = "another birth time"
        elif entry.check_len and prefix_hash(fd, entry.check_len) not in (entry.check_hash, None):
            why = f"other bytes in its first {entry.check_len} acknowledged"
        elif entry.check_len and prefix_hash(fd, entry.check_len) is None:
            why = f"fewer than the {entry.check_len} bytes acknowledged"
        if why is None:
            return False
        log.warning("%s has the inode and first bytes of the file tailed before as %s, but %s: it was deleted and "
                    "recreated while the agent was down; reading it from byte 0 as a new file", path,
                    entry.source_id, why)
        self.metrics.agent_recreated_files.inc()
        st = os.fstat(fd)
        # a generation of its own: its head may hash like the old file's, its offsets must not collide
        self._reborn[(st.st_dev, st.st_ino)] = entry.generation + 1
        return True

    # --- polling --------------------------------------------------------------------------------

    def poll(self, found: dict[str, SourceSpec], opened: list[Opened]) -> list[Chunk]:
        """Reconcile with discovery; returns chunks flushed from files that were truncated."""
        chunks: list[Chunk] = []
        now = time.monotonic()
        if self.parked:
            self._unpark()
        for tf in self._live():
            chunks += self._check(tf)
        for item in opened:
            self._adopt(item, found)
        self._starting = False
        live_paths = {tf.path for tf in self._live() if not tf.detached}
        for path in found:
            if path not in live_paths:
                self._follow_rename(path)
        for tf in self._live():
            self._identify(tf)
        self._let_go(now)
        return chunks

    def _identify(self, tf: TrackedFile) -> None:
        if tf.key is None:
            if tf.guarded:  # identification reads the file: on a mount that may hang, off this thread
                self.guard.call(tf.uid, tf.path, "identification", lambda: tf.identify(self.cfg.host, self.cfg.ip))
            elif not tf.identify(self.cfg.host, self.cfg.ip):
                return
        if tf.key is None or self.by_key.get(tf.key) is tf:
            return
        self.by_key[tf.key] = tf
        self.dirty = True
        log.info("tailing %s as %s (%s)", tf.path, tf.format, tf.key)
        # recorded before the first byte ships when a restart could not derive the same key from the
        # file alone: a new generation, or a head shorter than HEAD_BYTES (a file found within
        # moments of its creation, by inotify — after a crash its longer head would hash otherwise)
        if tf.generation > 1 or tf.ident.head_len < HEAD_BYTES:
            self.urgent = True

    @staticmethod
    def _look(tf: TrackedFile) -> tuple[os.stat_result, bool, bool]:
        """The system calls of a poll's look at a file: (its fstat, whether its path names another file
        or none now, whether its head bytes changed)."""
        st = os.fstat(tf.fd)
        moved = False
        if not tf.detached:
            try:
                at_path = os.stat(tf.path)
                moved = not (at_path.st_dev == st.st_dev and at_path.st_ino == st.st_ino)
            except FileNotFoundError:
                moved = True
        return st, moved, tf.ident is not None and not head_matches(tf.fd, tf.ident)

    def _check(self, tf: TrackedFile) -> list[Chunk]:
        if tf.guarded:  # on a mount that may hang: off this thread; nothing this poll while it runs
            done, look = self.guard.call(tf.uid, tf.path, "a look at its size and head", lambda: self._look(tf))
            if not done:
                return []
        else:
            look = self._look(tf)
        st, moved, head_changed = look
        if moved and not tf.detached:
            tf.detached = True
            log.info("%s was rotated or removed; reading it to the end", tf.path)
        if st.st_size < tf.read_offset or head_changed:
            return self.truncated(tf)
        if st.st_size != tf.size:
            tf.note_size(st.st_size, time.time())
            self.dirty = True
        return []

    def truncated(self, tf: TrackedFile) -> list[Chunk]:
        """Start the file over as a new generation; finish the old one from the copy, or from memory.

        Lost: what the agent saw beyond what the copy kept (or beyond what it read, without a copy).
        """
        seen = max(tf.size, tf.read_offset)
        # A detached file (rotated away, or the copy an old generation finishes from) is no longer a
        # source: when it is truncated or overwritten, its old generation ends and no new one starts.
        fresh = None if tf.detached else TrackedFile(
            path=tf.path, fd=os.dup(tf.fd), format=tf.format, fields=dict(tf.fields), options=dict(tf.options),
            generation=tf.generation + 1)
        copy = self._copy_of(tf) if tf.ident is not None and tf.key is not None and fresh else None
        chunks: list[Chunk] = []
        if copy is not None:
            path, fd, st = copy
            kept = st.st_size
            log.info("%s was truncated at offset %d; reading the rest of generation %d from its copy %s "
                     "(%d bytes)", tf.path, tf.read_offset, tf.generation, path, kept - tf.read_offset)
            self._continue_in(tf, path, fd, st)
            if fresh is not None:
                fresh.generation = self._adopt_newer_copies(fresh.path, tf, st) + 1
        else:
            kept = tf.read_offset
            # the pending rest is parsed as complete now, or, by a worker, once its pieces are back
            chunk, _ = (None, 0) if self.pooled else tf.flush_pending()
            chunks += [chunk] if chunk is not None else []
            log.info("%s was truncated at offset %d%s", tf.path, tf.read_offset,
                     f"; starting over as generation {tf.generation + 1}" if fresh else "")
            tf.retired = True
        lost = seen - kept
        if lost > 0:
            self._count_lost(tf.path, lost, "truncated")
            if tf.key is not None:
                chunks.append(self._loss_record(tf, kept, lost, "truncated"))
        if fresh is not None:
            # what the file holds now belongs to the new generation: seen, so a loss of it is counted
            # even if the next truncation comes before the next poll (polls run late on a busy node)
            fresh.note_size(os.fstat(fresh.fd).st_size, time.time())
            fresh.resend_below = fresh.size if self._starting else 0
            self._add(fresh)
            self._identify(fresh)
        self.dirty = True
        return chunks

    def _copy_of(self, tf: TrackedFile) -> tuple[str, int, os.stat_result] | None:
        """The copy logrotate's copytruncate left beside `tf` (same head, at least what was read)."""
        directory, name = os.path.split(tf.path)
        try:
            with os.scandir(directory or ".") as it:
                candidates = sorted(e.path for e in it if e.name.startswith(name) and e.name != name
                                    and not e.name.endswith(COMPRESSED_SUFFIXES))
        except OSError:
            return None
        for path in candidates:
            opened = self._open(path)
            if opened is None:
                continue
            fd, st = opened
            if (st.st_dev, st.st_ino) not in self._inodes and st.st_size >= tf.read_offset \
                    and head_matches(fd, tf.ident):
                return path, fd, st
            os.close(fd)
        return None

    def _adopt_newer_copies(self, original: str, tf: TrackedFile, copy: os.stat_result) -> int:
        """Copies made after `copy` hold whole generations the agent never saw (it fell more than one
        rotation behind): each is read from its start as a generation of its own. Returns the last
        generation number used."""
        generation = tf.generation
        directory, name = os.path.split(original)
        entries = []
        try:
            with os.scandir(directory or ".") as it:
                for e in it:
                    if e.name.startswith(name) and e.name != name and not e.name.endswith(COMPRESSED_SUFFIXES):
                        try:
                            entries.append((e.stat().st_mtime_ns, e.path))
                        except OSError:  # a dangling symlink, gone meanwhile: nothing to read
                            continue
        except OSError:
            return generation
        for mtime, path in sorted(entries):
            if mtime < copy.st_mtime_ns:
                continue
            opened = self._open(path)
            if opened is None:
                continue
            fd, st = opened
            if (st.st_dev, st.st_ino) in self._inodes or st.st_size == 0:
                os.close(fd)
                continue
            generation += 1
            missed = TrackedFile(path=original, fd=fd, format=tf.format, fields=dict(tf.fields),
                                 options=dict(tf.options), generation=generation, detached=True)
            missed.note_size(st.st_size, time.time())
            missed.resend_below = st.st_size if self._starting else 0
            log.info("%s holds a generation of %s the agent had not seen; reading it (%d bytes)",
                     path, original, st.st_size)
            self._add(missed)
            self._identify(missed)
        return generation

    def _continue_in(self, tf: TrackedFile, path: str, fd: int, st: os.stat_result) -> None:
        """The old generation goes on reading from the copy: same source_id, same offsets, and the
        same ``source`` path (the lines were written there; the copy is only where they are read)."""
        if self._inodes.get(tf.inode) is tf:
            del self._inodes[tf.inode]
        os.close(tf.fd)
        tf.fd, tf.detached = fd, True
        tf.inode = (st.st_dev, st.st_ino)
        tf.ident = dataclasses.replace(tf.ident, dev=st.st_dev, ino=st.st_ino)  # found again after a restart
        tf.note_size(st.st_size, time.time())
        self._inodes[tf.inode] = tf

    def _loss_record(self, tf: TrackedFile, offset: int, nbytes: int, reason: str) -> Chunk:
        """A WARNING record of the old source at the offset where the loss starts, so the archive knows."""
        table = rows_to_table([{
            "ts": time.time_ns(), "level": "WARNING", "logger": "ranklog.agent", "host": self.cfg.host,
            "ip": self.cfg.ip, "source": tf.ctx.source if tf.ctx else tf.path, "source_id": tf.key,
            "offset": offset, "format": "ranklog-agent", "job": tf.fields.get("job"),
            "rank": tf.fields.get("rank"),
            "msg": f"ranklog agent: {nbytes} bytes of this file were lost ({reason}) before they were read",
            "ranklog_lost_bytes": nbytes, "ranklog_lost_reason": reason}])
        batch = table.to_batches()[0]
        return Chunk(tf.key, offset, offset, {}, batch, 1, maybe_sent=offset < tf.resend_below)

    def _restart_generation(self, tf: TrackedFile) -> None:
        """At start: a checkpointed file is shorter than its acknowledged offset."""
        self.files.remove(tf)
        self.by_key.pop(tf.key, None)
        self._inodes.pop(tf.inode, None)
        fresh = TrackedFile(path=tf.path, fd=tf.fd, format=tf.format, fields=tf.fields, options=tf.options,
                            generation=tf.generation + 1, detached=tf.detached, resend_below=tf.resend_below)
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
        guarded = self.guard is not None and may_hang(item.st.st_dev)
        if item.spec.format != "auto" and not guarded:  # (guarded: detected when identified, off this thread)
            _, fields = resolve_format(item.path, item.spec.format)
        tf = TrackedFile(path=item.path, fd=item.fd, format=item.spec.format, fields=fields,
                         options=dict(item.spec.options), resend_below=item.st.st_size if self._starting else 0,
                         detect_fields=guarded and item.spec.format != "auto",
                         generation=self._reborn.pop((item.st.st_dev, item.st.st_ino), 1))
        tf.note_size(item.st.st_size, time.time())  # in the backlog from this poll on, not the next
        self._add(tf)

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
        tf.guarded = self.guard is not None and may_hang(st.st_dev)
        self._inodes[tf.inode] = tf
        if tf.key is not None:
            self.by_key[tf.key] = tf

    def _let_go(self, now: float) -> None:
        for tf in list(self.files):
            done = tf.retired and tf.watermark.pending == 0 and tf.parse_offset == tf.read_offset and not tf.inflight
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
                self.released.append(tf)
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
            if tf.check_len < CHECK_BYTES:
                tf.extend_check()

    def checkpoints(self) -> dict[str, FileCheckpoint]:
        out: dict[str, FileCheckpoint] = dict(self.parked)
        for tf in self.files:
            if tf.key is None or tf.ident is None:
                continue
            out[tf.key] = FileCheckpoint(
                source_id=tf.key, path=tf.path, dev=tf.ident.dev, ino=tf.ident.ino, head_len=tf.ident.head_len,
                head_hash=tf.ident.head_hash, generation=tf.generation, offset=tf.watermark.offset,
                parser_state=tf.watermark.state, format=tf.format, last_size=max(tf.size, tf.read_offset),
                btime_ns=tf.btime_ns, check_len=tf.check_len, check_hash=tf.check_hash)
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
