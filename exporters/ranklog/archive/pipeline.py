"""The data path: decode → dedup → WAL (group-commit fsync) → ACK, and WAL → Parquet in the background.

Ordering invariant: dedup and the WAL append happen under one lock, so the WAL order is the order
in which dedup saw the batches, and replaying the WAL through a fresh :class:`DedupIndex` rebuilds
exactly the same state and the same kept rows. A request whose rows were all duplicates writes
nothing but still waits until the WAL is durable up to its position (the copy it duplicates may be
another in-flight request's, not yet fsynced).

Flush (background thread, every `flush_interval` or sooner past `flush_rows`): pending tables →
one Parquet file per UTC hour, committed through the flush journal together with the WAL sequence
they cover. A dedup snapshot is written after a flush commits (never before: a snapshot may only
cover WAL entries already in Parquet), every `snapshot_interval` or after a segment's worth of WAL;
WAL segments covered by both are deleted.

Identity: a request's token may be bound to a node identity (:mod:`.auth`). Its records must carry
a ``host`` the identity may write, or the whole request is refused (403, nothing stored, counted in
``ranklog_archive_refused_records_total{reason="host_not_allowed"}``); dedup keys and the WAL entry
carry the identity, so replay rebuilds the same namespaced keys.

Start: journals are rolled forward, then the snapshot is loaded and the WAL replayed: entries
after the snapshot go through dedup; those after the flushed sequence are pending again.

Who wrote the records: a flush whose records bring observations the source → identity map lacks adds a
map file to its own journal transaction (:mod:`.identity_map`): the map and the data it describes
become visible together, the map first.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from . import journal, wal_damage
from .archive_config import ArchiveConfig
from .auth import SHARED, Caller, foreign_hosts
from .dedup import DedupIndex, pop_spans
from .identity_map import IdentityMap, pop_notices, without_notices
from .ingest import IngestError
from .ingest_budget import UNLIMITED, Charge
from .ingest_values import pop_repaired
from .parquet_writer import FLUSH_ZSTD_LEVEL, split_by_hour, write_parquet
from .scheduling import lower_current_thread
from .shippers.dispatch import decode_body as decode
from .storage import Storage, temp_name, write_atomic
from .wal import Wal, WalFailure

log = logging.getLogger("ranklog.archive.pipeline")
SNAPSHOT = "dedup.arrow"


@dataclass
class IngestResult:
    accepted: int
    duplicates: int
    wal_seq: int
    repaired: int = 0  # records kept with unusable values moved to attrs (ingest_values)


@dataclass
class _Pending:
    items: list[tuple[int, pa.Table]] = field(default_factory=list)
    rows: int = 0
    bytes: int = 0
    wal_bytes: int = 0


class HostNotAllowed(IngestError):
    """403: the request holds records of hosts its token may not write (nothing of it is stored)."""

    def __init__(self, caller: Caller, hosts: list[str], records: int) -> None:
        shown = ", ".join(repr(h) for h in hosts[:10]) + (f" and {len(hosts) - 10} more" if len(hosts) > 10 else "")
        super().__init__(403, "host_not_allowed", f"{caller.describe()} may not write host {shown}: this token "
                         f"may not write these hosts' records ({records} record(s)); nothing of this request was stored")
        self.hosts, self.records = hosts, records


def refuse_foreign_hosts(table: pa.Table, caller: Caller) -> None:
    """Raise :class:`HostNotAllowed` when `table` holds a record whose host `caller` may not write."""
    if caller.identity is None or table.num_rows == 0:
        return
    distinct = pc.unique(table["host"]).to_pylist()
    hosts = foreign_hosts(distinct, caller)
    if hosts:
        records = int(pc.sum(pc.is_in(table["host"], pa.array(hosts, pa.string()))).as_py() or 0)
        log.warning("refused %d record(s) of host(s) %s sent with the token of %s (bound to %s): the token may "
                    "not write them", records, ", ".join(hosts[:10]), caller.describe(), " ".join(caller.hosts))
        raise HostNotAllowed(caller, hosts, records)


def _notices(table: pa.Table, caller: Caller) -> tuple[pa.Table, list]:
    """An agent's identity notices (:mod:`.identity_map`): 400 when malformed, 403 when they name a host
    the caller's token may not write."""
    try:
        table, notices = pop_notices(table)
    except ValueError as exc:
        raise IngestError(400, "bad_body", str(exc)) from None
    if notices and caller.identity is not None:
        hosts = foreign_hosts(sorted({n.host for n in notices if n.host}), caller)
        if hosts:
            raise HostNotAllowed(caller, hosts, 0)
    return table, notices


class Pipeline:
    def __init__(self, config: ArchiveConfig, storage: Storage, state_dir: str, metrics) -> None:
        self.config = config
        self.storage = storage
        self.state_dir = state_dir
        self.metrics = metrics
        os.makedirs(state_dir, exist_ok=True)
        self.wal = Wal(os.path.join(state_dir, "wal"), config.wal_segment_size)
        self.dedup = DedupIndex()
        self.identity_map = IdentityMap(storage)
        self._lock = threading.Lock()
        self._pending = _Pending()
        self._flushing_bytes = 0
        self._flushing_wal_bytes = 0
        self.flushed_seq = 0
        self.snapshot_seq = 0
        self._snapshot_time = time.monotonic()
        self._snapshot_wal_bytes = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._flush_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.failure: str | None = None
        self.on_fatal: Callable[[str], None] | None = None  # the service ends the process (service.py)
        self._wal_trouble_since: float | None = None  # monotonic time of the first retryable WAL failure in a row
        self._unapplied: dict | None = None  # a committed flush journal whose files are not all visible yet

    # --- start ---------------------------------------------------------------------------------
    def recover(self) -> None:
        flush_record = journal.recover(self.storage, self.state_dir)
        self.flushed_seq = int((flush_record or {}).get("wal_seq", 0))
        self.identity_map.load()
        snapshot_path = os.path.join(self.state_dir, SNAPSHOT)
        if os.path.exists(snapshot_path):
            with ipc.open_file(snapshot_path) as reader:
                table = reader.read_all()
            self.dedup = DedupIndex.restore(table)
            self.snapshot_seq = int((table.schema.metadata or {}).get(b"wal_seq", b"0"))
        replayed = 0
        for entry in self.wal.replay():
            if entry.seq <= self.snapshot_seq:
                continue
            table, _ = pop_repaired(decode(entry.body, entry.content_type, entry.encoding, entry.received_ns,
                                           self.config.max_decoded_size))
            table = without_notices(table)  # saved when they came
            table, spans = pop_spans(table)
            keep = self.dedup.apply(table, entry.received_ns / 1e9, spans, entry.identity)
            if entry.seq > self.flushed_seq:
                self._add_pending(entry.seq, table.filter(keep) if not keep.all() else table, len(entry.body))
                replayed += int(keep.sum())
        # never below what Parquet and the snapshot cover, whatever happened to the WAL (wal.py)
        self.wal.open_for_append(max(self.flushed_seq, self.snapshot_seq))
        self._report_damage()
        log.info("recovered: flushed through WAL seq %d, snapshot at %d, %d record(s) replayed into the "
                 "flush queue, %d source(s) in the dedup index; next WAL seq %d", self.flushed_seq, self.snapshot_seq,
                 replayed, len(self.dedup), self.wal.last_seq + 1)

    def _report_damage(self) -> None:
        """Count, log and store a notice of what WAL damage lost (wal_damage), then set the damaged
        segments aside — in that order, so a crash in between finds the damage again."""
        found = wal_damage.losses(self.wal.damage, self.flushed_seq)
        if found:
            table = wal_damage.notices(found, self.config.archive_id, self.wal.directory)
            sink = pa.BufferOutputStream()
            with ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
            _, target = self._commit(table, {}, sink.getvalue().to_pybytes(), 1, 0, time.time_ns(), None)
            self.wal.sync_to(target)
            wal_damage.count(found, self.metrics)
            for loss in found:
                log.error("acknowledged records lost to WAL damage: %d entr%s from seq %d (%s record(s), %d bytes) "
                          "in %s at byte %d; a loss notice is stored for `ranklog integrity`", loss.entries,
                          "y" if loss.entries == 1 else "ies", loss.first_seq,
                          "unknown" if loss.records is None else loss.records, loss.damage.size, loss.damage.segment,
                          loss.damage.position)
        elif self.wal.damage:
            log.warning("WAL damage found in entries already written to Parquet: nothing was lost")
        self.wal.set_aside()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._flush_loop, name="archive-flush", daemon=True)
        self._thread.start()

    # --- ingest (runs in a worker thread) ------------------------------------------------------
    def pending_bytes(self) -> int:
        return self._pending.bytes + self._flushing_bytes

    def ingest(self, body: bytes, content_type: int, encoding: int, caller: Caller = SHARED,
               charge: Charge = UNLIMITED) -> IngestResult:
        """Decode, dedup, append to the WAL and wait for it to be durable. What decoding holds is
        charged to `charge` as it goes (ingest_budget); once the table exists, only it stays charged."""
        if self.failure:
            raise WalFailure(self.failure)
        received_ns = time.time_ns()
        before = charge.held
        table, repaired = pop_repaired(decode(body, content_type, encoding, received_ns, self.config.max_decoded_size,
                                              charge))
        charge.give_back(charge.held - before)
        charge.add(table.nbytes, "decoded records")
        refuse_foreign_hosts(table, caller)
        table, notices = _notices(table, caller)
        if notices:
            self.identity_map.record(notices)
        table, spans = pop_spans(table)
        try:
            accepted, target = self._commit(table, spans, body, content_type, encoding, received_ns, caller.identity)
            self.wal.sync_to(target)
        except WalFailure as exc:
            self._wal_failed(exc)
            raise
        self._wal_trouble_since = None
        if self._pending.rows >= self.config.flush_rows:
            self._wake.set()
        return IngestResult(accepted, table.num_rows - accepted, target, repaired)

    def _commit(self, table: pa.Table, spans, body: bytes, content_type: int, encoding: int, received_ns: int,
                identity: str | None) -> tuple[int, int]:
        """Dedup and the WAL append of one decoded body; (records accepted, WAL seq to sync to)."""
        with self._lock:
            # dedup changes only together with the WAL append: staged() undoes it if the append
            # raises, so neither the state nor a snapshot ever holds a key the WAL does not
            with self.dedup.staged(table, received_ns / 1e9, spans, identity) as keep:
                accepted = int(keep.sum())
                if accepted:
                    seq = self.wal.append(body, content_type, encoding, received_ns, identity, accepted)
                    self._add_pending(seq, table if accepted == table.num_rows else table.filter(keep), len(body))
            return accepted, self.wal.last_seq

    def _wal_failed(self, exc: WalFailure) -> None:
        """A segment that cannot be opened is retried by the next request for up to `wal_retry_for`;
        anything else (a failed write or fsync), or a retry past that, is fatal (see :attr:`on_fatal`)."""
        now = time.monotonic()
        if exc.retryable:
            if self._wal_trouble_since is None:
                self._wal_trouble_since = now
            if now - self._wal_trouble_since < self.config.wal_retry_for:
                log.error("%s; answering 503 and retrying with the next request", exc)
                return
            self.fatal(f"{exc} (for {now - self._wal_trouble_since:.0f}s)")
        else:
            self.fatal(str(exc))

    def fatal(self, reason: str) -> None:
        """A failure that sticks: refuse ingest, say why on /readyz, and let the service exit non-zero."""
        if self.failure is None:
            self.failure = reason
            log.critical("%s; refusing ingest; the process exits so that its supervisor restarts it", reason)
            if self.on_fatal is not None:
                self.on_fatal(reason)

    def _add_pending(self, seq: int, table: pa.Table, wal_bytes: int) -> None:
        self._pending.items.append((seq, table))
        self._pending.rows += table.num_rows
        self._pending.bytes += table.nbytes
        self._pending.wal_bytes += wal_bytes

    def unflushed_wal_bytes(self) -> int:
        """WAL bytes whose records are not in Parquet yet (pending or being written)."""
        return self._pending.wal_bytes + self._flushing_wal_bytes

    # --- flush (background thread) -------------------------------------------------------------
    def _flush_loop(self) -> None:
        lower_current_thread(self.config.background_nice)
        while not self._stop.is_set():
            self._wake.wait(self.config.flush_interval)
            self._wake.clear()
            try:
                self.flush()
            except Exception as exc:
                self.metrics.archive_flush_failures.inc()
                # One line, not a trace: an object-store outage repeats this every interval.
                log.error("flush failed (%s); the rows stay in the WAL, retrying in %.1fs",
                          str(exc).splitlines()[0] if str(exc) else type(exc).__name__, self.config.flush_interval)
                self._stop.wait(self.config.flush_interval)

    def wait_visible(self, seq: int, timeout: float) -> bool:
        """Block until the records of WAL entries up to `seq` are readable in Parquet, asking the flush
        thread to run now (a verdict must not wait for the next flush interval); False on timeout."""
        deadline = time.monotonic() + timeout
        while self.flushed_seq < seq and self._thread is not None and self.failure is None:
            if time.monotonic() >= deadline:
                return False
            self._wake.set()
            time.sleep(0.01)
        with self._flush_lock:  # a flush under way makes its files visible before releasing it
            return self.flushed_seq >= seq and self._unapplied is None

    def flush(self) -> int:
        """Write everything pending to Parquet; returns the number of rows written."""
        with self._flush_lock:
            with self._lock:
                pending, self._pending = self._pending, _Pending()
                self._flushing_bytes, self._flushing_wal_bytes = pending.bytes, pending.wal_bytes
                seq_hi = pending.items[-1][0] if pending.items else self.flushed_seq
                snapshot = self._snapshot_if_due() if pending.items or self.snapshot_seq < seq_hi else None
            try:
                self._apply_committed()  # the previous flush's files first: its journal must not be replaced
                if pending.items:
                    self._write(pending, seq_hi)
            except Exception:
                with self._lock:  # keep the rows: they are ACKed and must reach Parquet
                    restored = _Pending(pending.items + self._pending.items, pending.rows + self._pending.rows,
                                        pending.bytes + self._pending.bytes, pending.wal_bytes + self._pending.wal_bytes)
                    self._pending, self._flushing_bytes, self._flushing_wal_bytes = restored, 0, 0
                raise
            self._flushing_bytes = self._flushing_wal_bytes = 0
            if snapshot is not None:
                self._write_snapshot(snapshot, seq_hi)
            self.wal.drop_through(min(self.flushed_seq, self.snapshot_seq))
            self.metrics.archive_wal_bytes.set(self.unflushed_wal_bytes())
            return pending.rows

    def _snapshot_if_due(self) -> pa.Table | None:
        wal_bytes = self.wal.size_bytes()
        due = (time.monotonic() - self._snapshot_time >= self.config.snapshot_interval
               or wal_bytes - self._snapshot_wal_bytes >= self.config.wal_segment_size or self._stop.is_set())
        if not due:
            return None
        now = time.time()
        self.dedup.settle(now, self.config.dedup_settle, self.config.retention.longest(),
                          self.config.dedup_body_window)
        self.metrics.archive_dedup_sources.set(len(self.dedup))
        self.metrics.archive_dedup_ranges.set(self.dedup.range_count())
        return self.dedup.snapshot()

    def _apply_committed(self) -> None:
        """Finish making the last committed flush visible (idempotent; raises while storage fails)."""
        if self._unapplied is not None:
            journal.apply(self.storage, self._unapplied)
            self._unapplied = None

    def _write(self, pending: _Pending, seq_hi: int) -> None:
        started = time.perf_counter()
        table = pa.concat_tables([table for _, table in pending.items])
        files: list[tuple[str, str]] = []
        for hour, rows in split_by_hour(table):
            final = self.storage.new_file_path(hour)
            temp = temp_name(final)
            write_parquet(self.storage, rows, temp, FLUSH_ZSTD_LEVEL)
            files.append((temp, final))
        mapped = self.identity_map.prepare(table)
        if mapped is not None:
            # renamed first: a reader that lists the data before the map (a follow) never sees
            # records whose map is not there yet
            files.insert(0, mapped[:2])
        record = journal.write(os.path.join(self.state_dir, journal.FLUSH_JOURNAL), files, wal_seq=seq_hi)
        self.identity_map.committed(mapped)
        # Committed: these rows are flushed whatever happens next. Making the files visible may still
        # fail (object store gone between PUT and copy); it is retried before the next flush, never
        # by writing the rows again (that would store them twice).
        self.flushed_seq = seq_hi
        self._unapplied = record
        try:
            self._apply_committed()
        except Exception as exc:
            self.metrics.archive_flush_failures.inc()
            log.error("flush committed but its files are not all visible yet (%s); retried before the next flush",
                      str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        self.metrics.archive_flush_seconds.observe(time.perf_counter() - started)
        try:
            self.identity_map.consolidate(int((time.time() - self.config.retention.longest()) * 1e9))
        except OSError as exc:  # the next flush tries again; readers merge the files meanwhile
            log.warning("identity map: merging its files failed (%s)", str(exc).splitlines()[0] if str(exc) else exc)
        log.debug("flushed %d row(s) into %d file(s) through WAL seq %d", table.num_rows, len(files), seq_hi)

    def _write_snapshot(self, snapshot: pa.Table, seq: int) -> None:
        snapshot = snapshot.replace_schema_metadata({"wal_seq": str(seq)})
        sink = pa.BufferOutputStream()
        with ipc.new_file(sink, snapshot.schema) as writer:
            writer.write_table(snapshot)
        write_atomic(os.path.join(self.state_dir, SNAPSHOT), sink.getvalue().to_pybytes())
        self.snapshot_seq = seq
        self._snapshot_time = time.monotonic()
        self._snapshot_wal_bytes = self.wal.size_bytes()

    # --- stop ----------------------------------------------------------------------------------
    def close(self) -> None:
        """Final flush and snapshot, so a clean restart replays nothing."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        if self.failure is None:
            try:
                self.flush()
            except Exception:
                log.exception("final flush failed; the WAL keeps the data for the next start")
        self.wal.close()
