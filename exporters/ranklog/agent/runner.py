"""The agent's main loop: discover → tail → parse → observe → ship, acknowledgements → checkpoints.

One thread reads and parses, one updates metrics from the parsed batches (:mod:`.metrics_thread`;
pyarrow releases the GIL in its kernels, so they overlap); ``senders`` threads encode and POST
requests. With ``parse_workers`` > 1 worker processes parse (:mod:`.parse_pool`), so reading,
parsing and shipping overlap on several cores; the reading thread parses only a read round's short
reads (a trickle's few lines a file) of files with nothing in a worker, all together, whose per-read
set-up costs a worker would pay apart for each (:meth:`.ParsePool.lend`). Parsed pieces and
acknowledged chunks come back through one event queue and only the main thread touches tracked
files and checkpoints, so there is no shared mutable state but those queues and the in-flight byte
budget. On stop, reading ends, what was already read gets ``shutdown_timeout``
seconds to be acknowledged, and the checkpoint is written; anything not acknowledged by then is
simply read again at the next start.
"""

from __future__ import annotations

import logging
import queue
import threading
import time

from .. import parse, token_file
from ..metrics import LabelBudget, create
from ..record import arrow_schema
from .agent_config import AgentConfig
from .backpressure import InflightBudget
from .checkpoint import CheckpointStore, CheckpointWriter
from .chunk import Chunk
from .discover import Discovery, DiscoveryThread
from .file_tracker import FileTracker
from .io_guard import IoGuard
from .log_metrics import BatchObserver
from .metrics_thread import ObserverThread
from .node_identity import NodeIdentity
from .parse_pool import Parsed, ParsePool, WorkerDied
from .presets import all_sources
from .ship import Shipper
from .suspects import SuspectPusher
from .tracked_file import TrackedFile

log = logging.getLogger("ranklog.agent")
# A read shorter than this (and than read_chunk: a full read is a backlog's) is parsed with the read
# round's other short reads, in the reading thread (Agent._parse_here): its cost is a parse's set-up
# (~0.8 ms whatever the size), the lines' own ~1.5–2 µs each stay below it up to a few hundred lines.
SMALL_READ = 64 * 1024
LOOK_NOW = "look now"  # event from discovery: a watched directory changed, poll before the next period


class Agent:
    def __init__(self, cfg: AgentConfig, registry=None) -> None:
        self.cfg = cfg
        self.metrics = create("agent", registry)
        token_file.check_path(cfg.token_file, self.metrics.token_file_insecure)
        self.budget = InflightBudget(cfg.max_unacked_bytes, self.metrics.agent_reading_paused)
        labels = LabelBudget(self.metrics.metric_label_overflow, cfg.max_jobs, cfg.max_ranks, cfg.max_metric_names)
        self.suspects = SuspectPusher(cfg, self.metrics) if cfg.suspect_push else None
        self.observer = ObserverThread(BatchObserver(self.metrics, labels, cfg.training_metrics,
                                                     self.suspects.offer if self.suspects else None))
        # acknowledged chunks (from the senders) and parse workers' answers, for the main thread
        self._events: queue.SimpleQueue[list[Chunk] | Parsed | WorkerDied | str] = queue.SimpleQueue()
        self.shipper = Shipper(cfg, self.metrics, self._events.put, arrow_schema())
        self.pool: ParsePool | None = None
        self.store = CheckpointStore(cfg.state_dir)
        self.writer: CheckpointWriter | None = None
        self.discovery = DiscoveryThread(Discovery(all_sources(cfg), ignore_dirs=(cfg.state_dir,)), cfg.poll_interval,
                                         self.metrics.agent_unreadable_paths, on_change=lambda: self._events.put(LOOK_NOW))
        self._look_now = False
        self.guard = IoGuard(cfg.stall_timeout, report=self.discovery.unreadable.note,
                             cleared=self.discovery.unreadable.forget)
        self.tracker = FileTracker(cfg, self.metrics, report=self.discovery.unreadable.note, guard=self.guard)
        self.identity = NodeIdentity()  # what the node's files say of each other's writers
        self._turn = 0
        self._short_read = min(SMALL_READ, cfg.read_chunk)

    def run(self, stop: threading.Event) -> None:
        cfg = self.cfg
        self.tracker.resume(self.store.load(), self.discovery.discovery.scan())
        self.writer = CheckpointWriter(self.store)
        self.discovery.scan_once()
        self.discovery.start()
        self.observer.start()
        if self.suspects is not None:
            self.suspects.start()
        self.shipper.start()
        if cfg.parse_workers > 1:
            self.pool = ParsePool(cfg.parse_workers, self.metrics, self._events.put, cfg.compression,
                                  cfg.training_metrics, piece_bytes=cfg.read_chunk)
        else:
            self.metrics.agent_parse_workers.set(1)
        next_poll = last_save = 0.0
        try:
            while not stop.is_set():
                now = time.monotonic()
                if now >= next_poll or self._look_now:
                    self._look_now = False
                    self._submit_all(self.tracker.poll(self.discovery.found, self.discovery.take()))
                    self._forget_released()
                    self._update_gauges()
                    next_poll = now + cfg.poll_interval
                self._drain_events()
                self.identity.lend(self.tracker.files, now)
                notices = self.identity.take_notices()
                if notices:
                    self.shipper.notify(notices)
                if self.tracker.urgent or (self.tracker.dirty and now - last_save >= cfg.checkpoint_interval):
                    self._save()
                    last_save = now
                worked = self._read_round(now)
                self.shipper.tick(caught_up=not worked and (self.pool is None or self.pool.idle))
                if not worked:
                    self._wait_for_event(min(0.05, max(0.0, next_poll - time.monotonic())))
        finally:
            self._shutdown()

    def _read_round(self, now: float) -> bool:
        """One read from each tracked file (rotating the start for fairness); True if anything moved.

        A short read (under ``SMALL_READ``: a trickle's few lines) is parsed at the round's end with
        the round's other short reads, in one pass where their format allows
        (:func:`ranklog.parse.parse_many`); a longer one at once (or in a parse worker). The round's
        batches go to the metrics thread together at its end (one summary for a trickle's many small
        reads); each chunk goes to the shipper as soon as it is parsed."""
        files = list(self.tracker.files)
        if not files:
            return False
        worked = False
        observed: list = []
        short: list[tuple[TrackedFile, bytes, bool]] = []
        self._turn = (self._turn + 1) % len(files)
        pool = self.pool
        for tf in files[self._turn:] + files[:self._turn]:
            if not self.budget.may_read():
                break
            if pool is not None and self.budget.tight and pool.waiting_piece(tf):
                continue  # its worker is behind: the budget left goes to the others
            if tf.resting(now):
                continue
            if tf.guarded:  # on a mount that may hang: read off this thread, taken when it returns (io_guard)
                done, outcome = self.guard.call(tf.uid, tf.path, "a read", lambda tf=tf: tf.read_step(
                    self.cfg.read_chunk, self.cfg.idle_final, now, parse_here=False))
                if not done:
                    continue
            else:
                outcome = tf.read_step(self.cfg.read_chunk, self.cfg.idle_final, now, parse_here=False)
            tf.rest_after(outcome.nread, self.cfg.read_chunk, now, self.cfg.tail_interval)
            if outcome.truncated:
                self._submit_all(self.tracker.truncated(tf))
                worked = True
                continue
            if outcome.nul_skipped:
                self._nul_region(tf, outcome)
                worked = True
                continue
            if outcome.nread:
                self.metrics.agent_bytes_read.inc(outcome.nread)
                self.metrics.agent_reads.inc()
            if outcome.raw is None:
                continue
            worked = True
            read = (tf, outcome.raw, outcome.final)
            if pool is not None:
                # counted when read: a slow or cold worker must not stop reading (a copytruncate copy
                # is overwritten at the next rotation); the in-flight budget bounds what waits for it
                self.budget.take(len(outcome.raw))
            if len(outcome.raw) < self._short_read and (pool is None or pool.lend(tf)):
                short.append(read)
            elif pool is not None:
                pool.send(*read)
            else:
                self._parse_here([read], observed)
        self._parse_here(short, observed)
        self.observer.submit(observed)
        return worked

    def _nul_region(self, tf: TrackedFile, outcome) -> None:
        """A run of NUL bytes passed over (tracked_file): counted, logged once per file, its chunk (no
        records) acknowledged like blank lines'."""
        self.metrics.agent_nul_bytes_skipped.inc(outcome.nul_skipped)
        if not tf.nul_warned:
            tf.nul_warned = True
            log.warning("%s holds %d NUL bytes from offset %d (a sparse or preallocated file, or blocks a crash left "
                        "unwritten): passed over, not shipped; counted in ranklog_agent_nul_bytes_skipped_total",
                        tf.path, outcome.nul_skipped, outcome.chunk.start)
        self._submit_all([outcome.chunk])

    def _parse_here(self, reads: list[tuple[TrackedFile, bytes, bool]], observed: list) -> None:
        """Parse reads in this thread, together (their chunks' batches join `observed`)."""
        if not reads:
            return
        started = time.perf_counter()
        buffers = [tf.parse_input(data) for tf, data, _ in reads]
        results = parse.parse_many([(buffer, tf.parse_offset, tf.ctx, final)
                                    for buffer, (tf, _, final) in zip(buffers, reads, strict=True)],
                                   read_time_ns=time.time_ns())
        chunks = []
        for buffer, (tf, _, _), result in zip(buffers, reads, results, strict=True):
            chunk = tf.parsed(buffer, result)
            self.identity.note(tf)
            if self.pool is not None:
                self.pool.give_back(tf)
            if result.errors:
                self.metrics.agent_parse_errors.labels(format=tf.format).inc(result.errors)
            if chunk is not None:
                chunks.append(chunk)
        self.metrics.agent_parse_worker_busy_seconds.labels(worker="reader").inc(time.perf_counter() - started)
        self._submit_all(chunks, counted=self.pool is not None, observed=observed)

    def _submit_all(self, chunks: list[Chunk], counted: bool = False, observed: list | None = None) -> None:
        """Hand chunks to the metrics thread (or add their batches to `observed`, for it later) and
        the shipper; their bytes join the in-flight budget unless they were `counted` when read
        (parse workers)."""
        for chunk in chunks:
            if observed is not None and chunk.summary is None:
                observed.append(chunk.batch)
            else:
                self.observer.submit(chunk.summary if chunk.summary is not None else chunk.batch)
            if not counted:
                self.budget.take(chunk.nbytes)
            self.shipper.submit(chunk)

    def _drain_events(self) -> None:
        while True:
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                return
            self._handle(event)

    def _wait_for_event(self, timeout: float) -> None:
        try:
            event = self._events.get(timeout=timeout)
        except queue.Empty:
            return
        self._handle(event)

    def _handle(self, event: list[Chunk] | Parsed | WorkerDied | str) -> None:
        if event is LOOK_NOW:
            self._look_now = True
        elif isinstance(event, Parsed):
            tf, chunk, errors = self.pool.take(event)
            if tf is not None:
                self.identity.note(tf)
            if errors:
                self.metrics.agent_parse_errors.labels(format=tf.format).inc(errors)
            if chunk is not None:
                self._submit_all([chunk], counted=True)
            self.pool.pump()
        elif isinstance(event, WorkerDied):
            self.pool.died(event)
        else:
            for chunk in event:
                self.tracker.acked(chunk)
                self.budget.give_back(chunk.nbytes)

    def _forget_released(self) -> None:
        for tf in self.tracker.released:
            self.identity.forget(tf)
            if self.pool is not None:
                self.pool.forget(tf)
        self.tracker.released.clear()

    def _save(self) -> None:
        if self.tracker.urgent:
            self.writer.save_now(self.tracker.checkpoints())
        else:
            self.writer.submit(self.tracker.checkpoints())
        self.tracker.dirty = self.tracker.urgent = False

    def _update_gauges(self) -> None:
        backlog, age = self.tracker.backlog()
        self.metrics.agent_backlog_bytes.set(backlog)
        self.metrics.agent_oldest_unshipped_seconds.set(age)
        self.metrics.agent_files_tracked.set(self.tracker.stats()["files"])
        self.budget.may_read()
        depth = self.metrics.agent_queue_depth
        depth.labels(queue="parse").set(self.pool.outstanding if self.pool is not None else 0)
        depth.labels(queue="observe").set(self.observer.depth)
        depth.labels(queue="ship").set(self.shipper.depth)

    def _shutdown(self) -> None:
        self.discovery.stop()
        deadline = time.monotonic() + self.cfg.shutdown_timeout
        while time.monotonic() < deadline:
            self.shipper.tick(force=True)
            if self.budget.inflight <= 0 and (self.pool is None or self.pool.outstanding == 0):
                break
            self._wait_for_event(0.1)
        self._drain_events()
        self.observer.stop()
        if self.suspects is not None:
            self.suspects.stop()
        if self.budget.inflight > 0:
            log.warning("stopping with %d bytes not yet acknowledged; they will be read again at the next start",
                        self.budget.inflight)
        self.shipper.stop(timeout=2.0)
        self._drain_events()
        if self.pool is not None:
            self.pool.close()
        if self.writer is not None:
            self.writer.close(self.tracker.checkpoints())
        self.guard.close()
        self.tracker.close()
