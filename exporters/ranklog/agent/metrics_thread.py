"""Metrics off the reading thread: parsed batches are observed by a thread of their own.

Why: observing a batch (group-bys, the signature search) costs 0.4–0.6 CPU-s per million lines;
on the reading thread it delays every next read by that much. pyarrow releases the GIL in those
kernels, so a second thread overlaps them with reading and parsing (the second core, or simply a
second share of a busy machine). One consumer keeps batches in file order, which the newest
timestamp and latest step logic of :class:`.log_metrics.BatchObserver` relies on. The queue is bounded:
an observer that falls behind slows reading down instead of holding batches in memory.

The batches waiting when the thread wakes are observed as one (in their order), and the reading
thread hands over a read round's batches as one list: a summary has set-up costs (~0.9 ms: the
group-bys, the signature regex compiled per call) that a trickle's small batches would pay one by
one — sixty-four files read in one round cost one summary, not sixty-four.
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
        """Queue a parsed batch, a list of them in file order, or a parse worker's summary of one
        (blocks while `backlog` items wait)."""
        if isinstance(item, list):
            item = [batch for batch in item if batch is not None and batch.num_rows]
            if item:
                self._queue.put(item)
        elif isinstance(item, BatchSummary) or (item is not None and item.num_rows):
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
            items = [self._queue.get()]
            while True:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            batches = []
            for item in items:
                if item is _STOP or isinstance(item, BatchSummary):
                    self._observe(batches)
                    batches = []
                if item is _STOP:
                    return
                if isinstance(item, BatchSummary):
                    self._guarded(self.observer.apply, item)
                elif isinstance(item, list):
                    batches.extend(item)
                else:
                    batches.append(item)
            self._observe(batches)

    def _observe(self, batches: list) -> None:
        if batches:
            self._guarded(self.observer.observe, batches)

    @staticmethod
    def _guarded(update, item) -> None:
        try:
            update(item)
        except Exception:  # a metrics bug must not stop shipping
            log.exception("cannot update metrics from a parsed batch")
