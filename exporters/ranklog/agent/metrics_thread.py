"""Metrics off the reading thread: parsed batches are observed by a thread of their own.

Why: observing a batch (group-bys, the signature search) costs 0.4–0.6 CPU-s per million lines;
on the reading thread it delays every next read by that much. pyarrow releases the GIL in those
kernels, so a second thread overlaps them with reading and parsing (the second core, or simply a
second share of a busy machine). One consumer keeps batches in file order, which the newest
timestamp and latest step logic of :class:`.log_metrics.BatchObserver` relies on. The queue is bounded:
an observer that falls behind slows reading down instead of holding batches in memory.
"""

from __future__ import annotations

import logging
import queue
import threading

from .log_metrics import BatchObserver, BatchSummary

log = logging.getLogger("ranklog.agent.observe")
_STOP = object()


class ObserverThread:
    def __init__(self, observer: BatchObserver, backlog: int = 16) -> None:
        self.observer = observer
        self._queue: queue.Queue = queue.Queue(maxsize=backlog)
        self._thread = threading.Thread(target=self._run, name="ranklog-observe", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, item) -> None:
        """Queue a parsed batch, or a parse worker's summary of one (blocks while `backlog` items wait)."""
        if isinstance(item, BatchSummary) or (item is not None and item.num_rows):
            self._queue.put(item)

    @property
    def depth(self) -> int:
        return self._queue.qsize()

    def stop(self, timeout: float = 5.0) -> None:
        """Observe what is queued, then end the thread."""
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            try:
                if isinstance(item, BatchSummary):
                    self.observer.apply(item)
                else:
                    self.observer.observe(item)
            except Exception:  # a metrics bug must not stop shipping
                log.exception("cannot update metrics from a parsed batch")
