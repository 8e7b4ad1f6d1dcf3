"""The background housekeeping thread: compaction, retention and the storage metrics.

Retention runs at start and every `retention.interval`; compaction every `compaction_interval`;
the storage scan (bytes/files stored, oldest partition, free disk) every 10 s. One thread does all
three, so compaction and retention never rewrite the same file concurrently; between archives sharing a
root the hour's lease (archive.leases) does the same. A failing pass is
logged and retried at the next period; it never stops ingest.
"""

from __future__ import annotations

import logging
import threading
import time

from .archive_config import ArchiveConfig
from .compaction import compact
from .leases import LeaseStore
from .quarantine import quarantined, unreadable_in_place
from .replacement import HourOwner
from .retention import apply_retention
from .scheduling import lower_current_thread
from .storage import Clock, DiskProbe, Storage

log = logging.getLogger("ranklog.archive.maintenance")
SCAN_INTERVAL = 10.0


class Maintenance:
    def __init__(self, config: ArchiveConfig, storage: Storage, state_dir: str, metrics, clock: Clock,
                 disk: DiskProbe, leases: LeaseStore) -> None:
        self.config, self.storage, self.state_dir = config, storage, state_dir
        self.metrics, self.clock, self.disk = metrics, clock, disk
        self.owner = HourOwner(storage, leases, config.s3.lease_ttl, state_dir, metrics)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next = {"retention": 0.0, "compaction": 0.0, "scan": 0.0}

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="archive-maintenance", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=120)

    def _loop(self) -> None:
        lower_current_thread(self.config.background_nice)
        while not self._stop.is_set():
            self.run_due()
            self._stop.wait(min(1.0, self.config.compaction_interval))

    def run_due(self) -> None:
        periods = {"retention": self.config.retention.interval, "compaction": self.config.compaction_interval,
                   "scan": SCAN_INTERVAL}
        jobs = {"retention": self.retention, "compaction": self.compaction, "scan": self.scan}
        for name, job in jobs.items():
            now = time.monotonic()
            if now < self._next[name] or self._stop.is_set():
                continue
            self._next[name] = now + periods[name]
            try:
                job()
            except OSError as exc:  # storage unreachable or failing: one line per pass, not a trace
                log.error("%s pass failed (%s); retrying next period", name, str(exc).splitlines()[0] if str(exc) else exc)
            except Exception:
                log.exception("%s pass failed; retrying next period", name)

    def retention(self) -> None:
        apply_retention(self.storage, self.owner, self.config.retention, self.clock.now(), self.metrics)
        self.scan()

    def compaction(self) -> None:
        compact(self.storage, self.owner, self.clock.now(), self.config.compaction_delay,
                self.config.compaction_target_size, self.metrics)

    def scan(self) -> None:
        files = self.storage.list_files(own_only=False)
        self.metrics.archive_stored_bytes.set(sum(f.size for f in files))
        self.metrics.archive_stored_files.set(len(files))
        self.metrics.archive_unreadable_files.set(len(unreadable_in_place(self.storage, files))
                                                  + quarantined(self.storage))
        if files:
            self.metrics.archive_oldest_partition_timestamp_seconds.set(min(f.hour_start for f in files))
        free = self.disk.free_bytes()
        if free is not None:
            self.metrics.archive_disk_free_bytes.set(free)
