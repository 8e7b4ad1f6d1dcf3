"""The sink: a bounded queue filled by callers and drained by one background writer thread.

The caller does the minimum — a tuple of time, level, logger name, message and arguments,
exception text, a copy of ``extra`` and the trace id, appended to a :class:`collections.deque`
(thread-safe without a lock). The writer thread wakes every ``flush_interval`` (or at once when
the queue is half full, or for ERROR and above), renders the batch to lines, assigns ``seq`` and
writes it with one ``write`` per batch of at most ``MAX_BATCH`` records. A record therefore
reaches the file within ``flush_interval`` (0.2 s by default) — ERROR and above at once — which
bounds what a SIGKILL can take; SIGTERM and normal exits flush everything.

Queue-full policy. The queue holds ``queue_size`` records. When it is full, records below WARNING
are dropped and counted; the writer then writes a WARNING record from logger ``ranklog`` with
``dropped`` (how many) and advances ``seq`` by that number, so the gap in ``seq`` sits where the
records were lost and the integrity check can see it. WARNING and above are never dropped: they
go in past the bound, and only when the queue reaches twice its size does the caller wait for
the writer to catch up (back-pressure, never loss; after 30 s of waiting — a stuck disk — the
record goes in anyway, trading memory for the record).

Arguments of a message are formatted in the writer thread when they are immutable scalars (str,
int, float, bool, None); anything else is formatted in the caller, so a tensor or list that the
training loop mutates afterwards is logged as it was at the call. ``extra`` is copied (shallowly)
at the call for the same reason.

Fork safety: in a forked child the queue, locks, counters, identity and file are replaced; the
parent's pending records stay with the parent. The child's writer starts on its first record and
writes its own file (its own pid) with ``seq`` from 1. Records are flushed at interpreter exit
(``atexit``) and, in ``multiprocessing`` children that leave through ``os._exit``, by a
``multiprocessing`` finalizer.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import weakref
from collections import deque
from pathlib import Path
from typing import Any

from . import process_identity as identity_mod
from .files import PartWriter
from .log_config import LoggingConfig
from .render import IDENT, LEVEL, Renderer, message

_SINKS: weakref.WeakSet[Sink] = weakref.WeakSet()  # every live sink, for fork and exit handling

_IMMUTABLE = frozenset({str, int, float, bool, type(None), bytes})
# Records rendered between two writes. Each write releases the GIL, so a small batch bounds how long
# the training thread can wait for the writer thread (≈ the time to render one batch).
MAX_BATCH = 256


class _Marker:
    """A flush request travelling through the queue; set when everything before it is written."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


class Sink:
    """One per process: owns the queue, the writer thread and the current file."""

    def __init__(self, config: LoggingConfig) -> None:
        self.config = config
        self._init_state()
        _SINKS.add(self)

    def _init_state(self) -> None:
        self._queue: deque = deque()
        self._capacity = self.config.queue_size
        self._hard_limit = 2 * self._capacity
        self._wake_at = self._capacity // 2
        self._wake = threading.Event()
        self._drop_lock = threading.Lock()
        self._dropped = 0
        self._reported_dropped = 0
        self._write_errors = 0
        self._seq = 0
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._files: PartWriter | None = None
        self._renderer: Renderer | None = None
        self.identity: identity_mod.Identity | None = None
        self.running = False

    # ---- caller side -------------------------------------------------------------------------
    def submit(self, levelno: int, name: str, msg: Any, args: tuple, exc: str | None, extra: Any,
               trace_id: str | None, sample_rate: float | None = None,
               ident: identity_mod.Identity | None = None, ts_ns: int | None = None) -> None:
        """Enqueue one record (the hot path: keep it short)."""
        if args:
            for arg in args:
                if type(arg) not in _IMMUTABLE:
                    msg, args = message(msg, args), ()
                    break
        if extra:
            extra = dict(extra)
        queue = self._queue
        if len(queue) >= self._capacity:
            if levelno < 30:
                with self._drop_lock:
                    self._dropped += 1
                if not self._wake.is_set():
                    self._wake.set()
                return
            if len(queue) >= self._hard_limit:
                self._backpressure()
        queue.append((ts_ns or time.time_ns(), levelno, name, msg, args, exc, extra, trace_id, sample_rate, ident))
        if not self.running:
            self._start()
        if (levelno >= 40 or len(queue) >= self._wake_at) and not self._wake.is_set():
            self._wake.set()

    def _backpressure(self) -> None:
        deadline = time.monotonic() + 30.0
        while len(self._queue) >= self._capacity and time.monotonic() < deadline:
            if not self.running or self._thread is None or not self._thread.is_alive():
                return
            self._wake.set()
            time.sleep(0.0005)

    @property
    def dropped(self) -> int:
        return self._dropped

    def _start(self) -> None:
        with self._start_lock:
            if self._stopping:
                # Logged after close() (e.g. from another atexit handler): write it synchronously.
                self._drain()
                return
            if self.running:
                return
            self.running = True
            self._thread = threading.Thread(target=self._run, name="ranklog-writer", daemon=True)
            self._thread.start()
            if "multiprocessing" in sys.modules:
                # multiprocessing children exit through os._exit, which skips atexit.
                from multiprocessing import util

                util.Finalize(self, self.close, exitpriority=100)

    def flush(self, timeout: float = 10.0) -> bool:
        """Block until everything queued so far is written (False on timeout or when not running)."""
        if not self.running or self._thread is None or not self._thread.is_alive():
            return not self._queue
        marker = _Marker()
        self._queue.append(marker)
        self._wake.set()
        return marker.done.wait(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued, stop the writer and close the file (idempotent)."""
        thread = self._thread
        self._stopping = True
        self._wake.set()
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            thread.join(timeout)
        if self._queue and (thread is None or not thread.is_alive()):
            self._drain()  # the writer never ran or died: write synchronously
        if self._files is not None:
            self._files.close()
        self.running = False

    # ---- writer side -------------------------------------------------------------------------
    def _setup(self) -> None:
        if self.identity is None:
            self.identity = identity_mod.detect(job=self.config.job)
            self._renderer = Renderer(self.identity, self.config.format)
            self._files = PartWriter(self.config.log_dir, self.identity, self.config.format,
                                     self.config.rotation, self.config.retention)

    def _run(self) -> None:
        interval = self.config.flush_interval
        while True:
            self._wake.wait(interval)
            self._wake.clear()
            self._drain()
            if self._stopping and not self._queue:
                return

    def _drain(self) -> None:
        self._setup()
        queue = self._queue
        while queue or self._dropped != self._reported_dropped:
            batch = []
            markers = []
            while queue and len(batch) < MAX_BATCH:
                entry = queue.popleft()
                if entry.__class__ is _Marker:
                    markers.append(entry)
                    break
                batch.append(entry)
            self._write_batch(batch)
            for marker in markers:
                marker.done.set()

    def _write_batch(self, batch: list) -> None:
        renderer = self._renderer
        assert renderer is not None and self._files is not None
        lines: list[str] = []
        dropped = self._dropped - self._reported_dropped
        if dropped:
            self._reported_dropped += dropped
            self._seq += dropped
            lines.append(renderer.render(self._drop_notice(dropped), self._next_seq()))
        try:
            lines += renderer.render_batch(batch, self._seq)
        except Exception:  # one record that cannot render must not cost the others
            lines += [self._render_one(renderer, entry, self._seq + i) for i, entry in enumerate(batch, 1)]
        self._seq += len(batch)
        if not lines:
            return
        try:
            self._files.write(lines)
        except OSError as exc:
            self._write_errors += 1
            if self._write_errors == 1:
                print(f"ranklog: cannot write logs under {self.config.log_dir}: {exc} (further errors are counted)",
                      file=sys.stderr)

    @staticmethod
    def _render_one(renderer: Renderer, entry: tuple, seq: int) -> str:
        try:
            return renderer.render(entry, seq)
        except Exception as exc:
            return renderer.render((entry[0], max(entry[LEVEL], 30), "ranklog", "unrenderable record: %r",
                                    (repr(exc),), None, None, None, None, entry[IDENT]), seq)

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _drop_notice(self, dropped: int) -> tuple:
        return (time.time_ns(), 30, "ranklog",
                "dropped %d records below WARNING: the log queue was full (queue_size=%d)",
                (dropped, self._capacity), None, {"dropped": dropped}, None, None, None)

    @property
    def path(self) -> Path | None:
        """The part being written (None before the first write)."""
        return self._files.path if self._files is not None else None

    # ---- fork --------------------------------------------------------------------------------
    def _after_fork_in_child(self) -> None:
        old_files = self._files
        stopping = self._stopping
        self._init_state()
        self._stopping = stopping
        if old_files is not None:
            old_files.close()


def _after_fork_in_child() -> None:
    for sink in list(_SINKS):
        sink._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@atexit.register
def _close_all_at_exit() -> None:
    for sink in list(_SINKS):
        sink.close(timeout=5.0)
