"""Parsing on more cores: raw bytes go to ``parse_workers`` worker processes, batches come back.

Why processes: the parsers' Python parts hold the GIL, so parse threads did not run faster than one
(measured: 0.9–1.3× with two threads on two cores); a process per worker does. A worker does all
the per-line work of a piece — parse, the metrics summary, the compressed Arrow IPC message the
request will carry, the last two in a thread of its own beside the next parse — so the main process
only reads, applies summaries and joins messages. What
flows is raw bytes one way, through a slot of shared memory (:mod:`.piece_arena`; the pipe carries
the slot number), and the (lz4-compressed, ~64 bytes a line) message back through the pipe. A short
read of a few lines (a trickle's) of a file with none of its bytes in a worker is parsed in the
reading thread instead, with the round's other short reads (:meth:`ParsePool.lend`): its costs are
set-up costs, which a worker pays for each read apart.

Guarantees, unchanged by the workers:

- identical records: a file is parsed by one worker at a time, in read order, and the worker keeps the
  unconsumed rest and the parser state between pieces exactly as the reading thread would
  (:mod:`.parse_worker`). Between two pieces — none of the file's in its worker — a file moves to a
  worker with fewer bytes to parse, taking the parser state of the last answer and the unconsumed
  rest (kept here, below) with it (``ranklog_agent_parse_files_moved_total``): files come and go, so
  where a file was first placed says little about where the work is now. The reading thread's parse
  of a short read is such a move too, there and back;
- bounded pieces: reads that waited for room are joined into pieces of at most ``piece_bytes``
  (``read_chunk``), so a worker's answers stream to the shipper instead of coming as one block;
- order and checkpoints: answers for a file arrive in the order its pieces were sent (one pipe per
  worker), become chunks in file order, and the checkpoint still moves only over acknowledged
  chunks;
- bounded memory: bytes are counted in the agent's in-flight budget (``max_unacked_bytes``) when
  they are read, not when parsed, so what waits for a worker is within that bound; past it reading
  pauses (the file is the buffer). Reading does not wait for a busy worker: a copytruncate copy, for
  one, is overwritten at the next rotation, so its rest is read at once. A worker gets at most
  ``depth`` pieces at a time; a file's reads meanwhile are joined into its next piece (per-piece
  costs — the metrics summary, the IPC message — stay per megabyte, not per read). Only once the
  budget is half used does a file with a whole piece already waiting (:meth:`ParsePool.waiting_piece`)
  stop being read until its worker takes that piece: the rest of the budget then goes to files
  whose workers are running dry, instead of piling up behind one busy worker while the other
  idles (measured, 4 files, 2 workers, 2.4 M lines: workers busy 0.73–0.97 → 0.91–0.97 of a run);
- a worker that dies is replaced: the bytes it held (sent and not yet parsed) are kept here until
  they are parsed, so they go again to the new worker — even for a file rotated away or truncated
  since — and nothing is lost or parsed twice. A worker that keeps dying (``max_restarts`` within
  ``restart_window`` seconds) stops the agent with an error: a parser that crashes on some input
  must be fixed, not looped on.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .parse_worker import read_frame, write_frame
from .piece_arena import PieceArena
from .tracked_file import TrackedFile

log = logging.getLogger("ranklog.agent.parse")


@dataclass
class Parsed:
    """A worker's answer for one piece of a file (delivered through the agent's event queue)."""

    worker: int
    generation: int  # of the worker process; answers of a replaced process are ignored
    header: dict[str, Any]
    body: bytes | None  # the batch's Arrow IPC message (ship.encode_message)


@dataclass
class WorkerDied:
    worker: int
    generation: int
    detail: str


@dataclass
class _Worker:
    index: int
    generation: int
    proc: subprocess.Popen
    arena: PieceArena | None = None  # shared memory for the raw bytes (None: they go through the pipe)
    outbox: queue.SimpleQueue = field(default_factory=queue.SimpleQueue)
    outstanding: int = 0  # pieces sent and not yet answered (main thread only)
    sizes: deque[int] = field(default_factory=deque)  # their sizes, in the order the answers come
    load: int = 0  # their bytes
    known: set[int] = field(default_factory=set)  # files whose context this process holds
    threads: list[threading.Thread] = field(default_factory=list)


_F_SETPIPE_SZ = 1031  # Linux fcntl: a pipe buffer as large as a piece's frame means fewer wake-ups


def _spawn(options: str, pass_fds: tuple[int, ...] = ()) -> subprocess.Popen:
    """A worker on this interpreter with this process's import path. `sys.executable` may be a path the
    agent's user cannot open (a venv linking into another user's home, entered under setpriv/sudo);
    the running binary itself, /proc/self/exe, always can be."""
    python = sys.executable if sys.executable and os.access(sys.executable, os.X_OK) else "/proc/self/exe"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path for path in sys.path if path)}
    proc = subprocess.Popen([python, "-m", "ranklog.agent.parse_worker", options], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, close_fds=True, pass_fds=pass_fds, env=env)
    for pipe in (proc.stdin, proc.stdout):
        try:
            fcntl.fcntl(pipe.fileno(), _F_SETPIPE_SZ, 1 << 20)
        except OSError:
            pass  # above /proc/sys/fs/pipe-max-size: the default buffer works, with more wake-ups
    return proc


class ParsePool:
    def __init__(self, workers: int, metrics, deliver: Callable[[Any], None], compression: str = "lz4",
                 training_metrics: list[str] | None = None, depth: int = 2, piece_bytes: int = 8_000_000,
                 max_restarts: int = 5, restart_window: float = 60.0) -> None:
        self._options = {"compression": compression, "training_metrics": list(training_metrics or [])}
        self._metrics = metrics
        self._deliver = deliver
        self._max_restarts = max_restarts
        self._restart_window = restart_window
        self._restarts: deque[float] = deque()
        self._generations = 0
        self._closing = False
        self.depth = depth  # pieces a worker holds at most, one arena slot each
        self.piece_bytes = piece_bytes
        self._workers = [self._start(i) for i in range(workers)]
        self._home: dict[int, int] = {}  # file uid → worker index
        self._files: dict[int, TrackedFile] = {}
        # bytes sent and not yet parsed, per file: [parse_offset, read_offset) of the file, exactly
        self._held: dict[int, deque[bytes]] = {}
        self._unsent: dict[int, tuple[list[bytes], bool]] = {}  # reads waiting for room in their worker
        self._posted: dict[int, int] = {}  # pieces of a file in its worker
        self._fields: dict[int, dict] = {}  # the layout defaults each file's worker holds
        metrics.agent_parse_workers.set(workers)

    # --- processes ---------------------------------------------------------------------------------

    def _start(self, index: int) -> _Worker:
        self._generations += 1
        created = PieceArena.create(self.depth, self.piece_bytes)
        arena, fd = created if created is not None else (None, -1)
        options = {**self._options, "arena": {"fd": fd, "slots": self.depth, "slot_bytes": self.piece_bytes}
                   if arena is not None else None}
        try:
            proc = _spawn(json.dumps(options), (fd,) if arena is not None else ())
        finally:
            if arena is not None:
                os.close(fd)  # the worker has its own; the mapping stays
        worker = _Worker(index, self._generations, proc, arena)
        for target, name in ((self._send_loop, "send"), (self._receive_loop, "receive")):
            thread = threading.Thread(target=target, args=(worker,), name=f"ranklog-parse-{index}-{name}", daemon=True)
            thread.start()
            worker.threads.append(thread)
        return worker

    def _send_loop(self, worker: _Worker) -> None:
        stdin = worker.proc.stdin
        while True:
            item = worker.outbox.get()
            if item is None:
                break
            try:
                write_frame(stdin, *item)
            except (OSError, ValueError):
                break  # the process died: its receiver reports it
        try:
            stdin.close()
        except OSError:
            pass

    def _receive_loop(self, worker: _Worker) -> None:
        stdout = worker.proc.stdout
        detail = "exited"
        while True:
            try:
                frame = read_frame(stdout)
            except Exception as exc:  # a torn frame: treated like a death
                frame, detail = None, repr(exc)
            if frame is None:
                break
            header, payload = frame
            if "error" in header:
                detail = header["error"]
                self._deliver(WorkerDied(worker.index, worker.generation, detail))
                return
            self._deliver(Parsed(worker.index, worker.generation, header, payload if header["rows"] else None))
        code = worker.proc.wait()
        self._deliver(WorkerDied(worker.index, worker.generation, f"{detail} (exit status {code})"))

    # --- sending (main thread) ---------------------------------------------------------------------

    def _worker_of(self, tf: TrackedFile) -> _Worker:
        index = self._home.get(tf.uid)
        if index is None:
            files = [0] * len(self._workers)
            for home in self._home.values():
                files[home] += 1
            index = self._home[tf.uid] = min(range(len(self._workers)),
                                             key=lambda i: (self._workers[i].load, files[i]))
            self._files[tf.uid] = tf
            self._held[tf.uid] = deque()
            self._posted[tf.uid] = 0
        return self._workers[index]

    def _rehome(self, tf: TrackedFile) -> _Worker:
        """The worker to post `tf`'s waiting reads to: its own, unless the file has no piece in it and
        another worker has fewer bytes to parse — then the file moves there with what it needs to go
        on (the parser state the agent got with the last answer, the unconsumed rest from the held
        bytes), so a worker is not left idle while the other has a queue. Files come and go (a node's
        ranks restart, rotations), so where a file started says little about where work is now."""
        home = self._workers[self._home[tf.uid]]
        if self._posted[tf.uid]:
            return home
        best = min(self._workers, key=lambda worker: worker.load)
        if best.load < home.load:
            self._leave(home, tf)
            self._home[tf.uid] = best.index
            self._metrics.agent_parse_files_moved.inc()
            home = best
        if tf.uid not in home.known:  # moved, or its last piece was parsed here: it starts at parse_offset
            _, final = self._unsent[tf.uid]
            self._unsent[tf.uid] = (list(self._held[tf.uid]), final)  # the unconsumed rest, then the reads
        return home

    def _leave(self, worker: _Worker, tf: TrackedFile) -> None:
        """`worker` drops `tf`'s context (its rest and parser state are no longer the file's)."""
        if tf.uid in worker.known:
            worker.known.discard(tf.uid)
            worker.outbox.put(({"op": "forget", "file": tf.uid}, b""))

    def lend(self, tf: TrackedFile) -> bool:
        """Let the reading thread parse `tf`'s next read, if none of its bytes are in a worker or
        waiting for one (so its pieces stay in order): its worker forgets it and its unconsumed rest
        moves from the held bytes to ``carry``. :meth:`give_back` after the parse; the next piece
        sent to a worker then starts at ``parse_offset`` with the parser state the reading thread
        left (:meth:`_rehome`). The reading thread parses a trickle's short reads, many files' at
        once (:func:`ranklog.parse.parse_many`), where a worker would pay a parse's, a metrics
        summary's and an IPC message's set-up costs (~1–2 ms) for each read apart."""
        if tf.inflight:
            return False
        self._worker_of(tf)
        self._leave(self._workers[self._home[tf.uid]], tf)
        held = self._held[tf.uid]
        tf.carry = b"".join(held)
        held.clear()
        return True

    def give_back(self, tf: TrackedFile) -> None:
        """The reading thread parsed `tf`'s read (:meth:`lend`): its unconsumed rest is held here again."""
        if tf.carry:
            self._held[tf.uid].append(tf.carry)
        tf.carry = b""

    def send(self, tf: TrackedFile, data: bytes, final: bool) -> None:
        """Parse `data` (the bytes of `tf` right after what was read before) in the file's worker (or a
        less busy one, :meth:`_rehome`): at once when the worker has fewer than `depth` pieces, else
        joined with the file's next reads into pieces of up to `piece_bytes` when it has room (small
        reads of a busy node become big pieces, as they would on disk)."""
        self._worker_of(tf)
        if data:
            self._held[tf.uid].append(data)
        unsent = self._unsent.get(tf.uid)
        if unsent is None:
            unsent = self._unsent[tf.uid] = ([], False)
            tf.inflight += 1  # counted until answered, so no idle flush overtakes it
        unsent[0].append(data)
        self._unsent[tf.uid] = (unsent[0], final)
        worker = self._rehome(tf)
        if worker.outstanding < self.depth:
            self._post_unsent(worker, tf)

    def pump(self) -> None:
        """Send the joined reads of files whose worker has room again."""
        for uid in list(self._unsent):
            tf = self._files[uid]
            worker = self._rehome(tf)
            if worker.outstanding < self.depth:
                self._post_unsent(worker, tf)

    def _post_unsent(self, worker: _Worker, tf: TrackedFile) -> None:
        """Post the file's waiting reads, joined up to `piece_bytes` per piece while the worker has room;
        a longer backlog stays here for the next room. Bounded pieces keep a worker's answers
        streaming to the shipper, instead of one block of everything read while it was busy."""
        pieces, final = self._unsent.pop(tf.uid)
        tf.inflight -= 1  # _post counts it again
        offset = tf.read_offset - sum(len(piece) for piece in pieces)
        while pieces:
            size, cut = 0, 0
            while cut < len(pieces) and (cut == 0 or size + len(pieces[cut]) <= self.piece_bytes):
                size += len(pieces[cut])
                cut += 1
            joined, pieces = pieces[:cut], pieces[cut:]
            if pieces and worker.outstanding + 1 >= self.depth:
                self._post(worker, tf, offset, b"".join(joined), False)
                self._unsent[tf.uid] = (pieces, final)
                tf.inflight += 1
                return
            self._post(worker, tf, offset, b"".join(joined), final and not pieces)
            offset += size

    def _post(self, worker: _Worker, tf: TrackedFile, offset: int, data: bytes, final: bool) -> None:
        header: dict[str, Any] = {"op": "parse", "file": tf.uid, "offset": offset, "final": final,
                                  "path": tf.path, "mtime_ns": tf.mtime_ns if tf.mtime_ns is not None else
                                  (os.fstat(tf.fd).st_mtime_ns if tf.fd >= 0 else None),
                                  "read_time_ns": time.time_ns()}
        if tf.uid not in worker.known:
            ctx = tf.ctx
            header["ctx"] = {"source": tf.path, "source_id": ctx.source_id, "format": ctx.format, "host": ctx.host,
                             "ip": ctx.ip, "fields": dict(ctx.fields), "state": dict(ctx.state),
                             "options": dict(ctx.options)}
            header["parse_offset"] = tf.parse_offset
            worker.known.add(tf.uid)
            self._fields[tf.uid] = dict(tf.ctx.fields)
        elif self._fields.get(tf.uid) != tf.ctx.fields:  # the node's identity join lent it more (.node_identity)
            header["fields"] = self._fields[tf.uid] = dict(tf.ctx.fields)
        slot = worker.arena.put(data) if worker.arena is not None else None
        if slot is not None:
            header["slot"], header["size"] = slot, len(data)
        worker.outstanding += 1
        worker.sizes.append(len(data))
        worker.load += len(data)
        self._posted[tf.uid] += 1
        tf.inflight += 1
        worker.outbox.put((header, data if slot is None else b""))

    def forget(self, tf: TrackedFile) -> None:
        """`tf` is let go: its worker drops its context."""
        index = self._home.pop(tf.uid, None)
        self._files.pop(tf.uid, None)
        self._held.pop(tf.uid, None)
        self._unsent.pop(tf.uid, None)
        self._posted.pop(tf.uid, None)
        self._fields.pop(tf.uid, None)
        if index is not None:
            self._leave(self._workers[index], tf)

    def waiting_piece(self, tf: TrackedFile) -> bool:
        """Do `tf`'s reads that wait for room in its worker already make a whole piece?"""
        unsent = self._unsent.get(tf.uid)
        return unsent is not None and sum(len(piece) for piece in unsent[0]) >= self.piece_bytes

    # --- answers (main thread) ---------------------------------------------------------------------

    def take(self, event: Parsed):
        """Apply one answer: (the TrackedFile, the chunk or None, lines kept as text) — (None, None, 0)
        for an answer to forget (a replaced process, a file let go)."""
        worker = self._workers[event.worker]
        if event.generation != worker.generation:
            return None, None, 0
        worker.outstanding -= 1
        worker.load -= worker.sizes.popleft()
        header = event.header
        if "slot" in header:
            worker.arena.release(header["slot"])
        self._metrics.agent_parse_worker_busy_seconds.labels(worker=str(event.worker)).inc(header["busy"])
        tf = self._files.get(header["file"])
        if tf is None:
            return None, None, 0
        if header["start"] != tf.parse_offset:
            raise RuntimeError(f"parse worker {event.worker} answered for offset {header['start']} of {tf.path}, "
                               f"expected {tf.parse_offset}")
        tf.inflight -= 1
        self._posted[tf.uid] -= 1
        self._release(tf.uid, header["consumed"])
        tf.ctx.state = header["state"]
        chunk = tf.take(header["consumed"], None, dict(header["state"]), rows=header["rows"])
        if chunk is not None and chunk.rows:
            chunk.encoded, chunk.summary = event.body, header["summary"]
        return tf, chunk, header["errors"]

    def _release(self, uid: int, consumed: int) -> None:
        held = self._held[uid]
        while consumed and held:
            first = held[0]
            if len(first) <= consumed:
                consumed -= len(first)
                held.popleft()
            else:
                held[0] = first[consumed:]
                consumed = 0

    def died(self, event: WorkerDied) -> None:
        """Replace a dead worker; its files' unparsed bytes go to the new process (or raise when it
        keeps dying)."""
        worker = self._workers[event.worker]
        if event.generation != worker.generation or self._closing:
            return
        now = time.monotonic()
        self._restarts.append(now)
        while self._restarts and now - self._restarts[0] > self._restart_window:
            self._restarts.popleft()
        self._metrics.agent_parse_worker_restarts.inc()
        worker.outbox.put(None)
        if worker.proc.poll() is None:
            worker.proc.kill()
        if len(self._restarts) > self._max_restarts:
            raise RuntimeError(f"parse worker {event.worker} died {len(self._restarts)} times within "
                               f"{self._restart_window:.0f}s; last: {event.detail.strip()[-2000:]}")
        log.error("parse worker %d died (%s); starting a new one and handing it the unparsed bytes of its files",
                  event.worker, event.detail.strip()[-2000:])
        fresh = self._workers[event.worker] = self._start(event.worker)
        for uid, home in self._home.items():
            if home != event.worker:
                continue
            tf = self._files[uid]
            tf.inflight = 0
            self._posted[uid] = 0
            self._unsent.pop(uid, None)  # in the held bytes too
            pending = b"".join(self._held[uid])
            self._held[uid] = deque([pending]) if pending else deque()
            if pending:
                self._post(fresh, tf, tf.read_offset - len(pending), pending, False)

    # --- gauges, stop ------------------------------------------------------------------------------

    @property
    def outstanding(self) -> int:
        return sum(worker.outstanding for worker in self._workers)

    @property
    def idle(self) -> bool:
        """Nothing read is waiting for a worker or in one."""
        return not self._unsent and self.outstanding == 0

    def close(self, timeout: float = 2.0) -> None:
        self._closing = True
        for worker in self._workers:
            worker.outbox.put(None)
        deadline = time.monotonic() + timeout
        for worker in self._workers:
            try:
                worker.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                worker.proc.kill()
                worker.proc.wait()
            if worker.arena is not None:
                worker.arena.close()
