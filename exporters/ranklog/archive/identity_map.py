"""The source → identity map the archive keeps beside its data, written as it ingests.

Who wrote a record is often learned after the record was stored: a Ray worker's first lines come
before the ``[Rank 1]`` line that names it, its ``.out`` file and core-worker log never name it, a
torchrun rank file names only its local rank. The read side (``ranklog query``, the Loki API,
``/v1/query``, triage) joins what is known at the time of the query (:mod:`ranklog.source_identity`);
this module keeps what it needs: the *observations* of every flushed record — each distinct
(source id, host, pid, local rank, rank, role) with the source's path, format and job and the time
span of its records (:func:`ranklog.source_identity.observe`). A few rows per source, however many
records: the rules run over these, never over the records.

Layout (:data:`ranklog.archive_layout.IDENTITY_DIR`): ``<root>/_ranklog_index/identity/
<archive-id>-<seq>.rlidentity``, Parquet inside, a name that no ``*.parquet`` glob matches. Each flush
that brings observations this archive has not saved yet (a new key, or a span grown by more than
:data:`SPAN_SLACK_NS`) writes one more file *in the flush's own journal transaction*, so a map file
becomes visible exactly with the data it describes, and a crash replays both or neither. When an
archive has more than :data:`MAX_FILES` files, it writes one file with all of its observations (those
past the longest retention left out) and deletes the others; readers read every archive's files and
merge them, tolerating one that vanished while they listed. At start the archive reads its own files
back, so what it saved before is not written again.

An agent also tells what it learned of a file after shipping its records (a rank its node's other
files lend it, a launcher's pairing of local and global ranks): *identity notices* in the schema
metadata of an ingest body (:data:`ranklog.source_identity.NOTICES_METADATA_KEY`), possibly without
any record. They are saved at once, in a file of their own, before the body is acknowledged.
"""

from __future__ import annotations

import logging
import threading

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ..archive_layout import IDENTITY_DIR, IDENTITY_SUFFIX
from ..source_identity import (
    NOTICES_METADATA_KEY,
    OBSERVED,
    Group,
    map_files,
    merge_observations,
    observation_schema,
    observations_table,
    observe,
    parse_notices,
    read_map_file,
)
from .storage import Storage, temp_name

log = logging.getLogger("ranklog.archive.identity_map")
MAX_FILES = 32
SPAN_SLACK_NS = 10 * 60 * 1_000_000_000  # a key's saved span is refreshed when it grew more than this


class IdentityMap:
    """This archive's observations: what is saved, and what a flush must add (see the module docstring)."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._lock = threading.Lock()
        self._saved: dict[tuple, tuple[int | None, int | None, int]] = {}  # key → (first, last, records)
        self._files: list[str] = []

    # --- start ----------------------------------------------------------------------------------
    def load(self) -> None:
        """Read this archive's own map files back; drop temps a crash left before their commit."""
        prefix = f"{self.storage.archive_id}-"
        mine = [info for info in map_files(self.storage.fs, self.storage.base) if info.base_name.startswith(prefix)]
        tables = []
        for info in mine:
            try:
                tables.append(read_map_file(self.storage.fs, info.path))
            except FileNotFoundError:
                continue
        self._remember(merge_observations(tables))
        self._files = [info.path for info in mine]
        selector = pafs.FileSelector(f"{self.storage.base}/{IDENTITY_DIR}", allow_not_found=True)
        for info in self.storage.fs.get_file_info(selector):
            if info.base_name.startswith(f".{prefix}") and info.base_name.endswith(".tmp"):
                self.storage.delete(info.path)

    # --- flush ----------------------------------------------------------------------------------
    def prepare(self, table: pa.Table) -> tuple[str, str, pa.Table] | None:
        """The map file a flush of `table` must add to its transaction, written under its temp name:
        (temp, final, its observations), or None when it observes nothing new."""
        observed = observe(table)
        with self._lock:
            news = [i for i, row in enumerate(_rows(observed)) if self._is_new(row)]
        if not news:
            return None
        delta = observed.take(pa.array(news, pa.int64()))
        final = self._new_path()
        temp = temp_name(final)
        _write(self.storage, delta, temp)
        return temp, final, delta

    def committed(self, prepared: tuple[str, str, pa.Table] | None) -> None:
        """The flush that held `prepared` is committed: its observations are saved."""
        if prepared is None:
            return
        _, final, delta = prepared
        with self._lock:
            self._remember(delta)
            self._files.append(final)

    def record(self, notices: list[Group]) -> None:
        """An agent's identity notices (what it learned of files whose records it already shipped):
        the new ones saved at once, in a file of their own (they may come without any record)."""
        observed = observations_table(notices)
        with self._lock:
            news = [i for i, row in enumerate(_rows(observed)) if self._is_new(row)]
        if not news:
            return
        delta = observed.take(pa.array(news, pa.int64()))
        final = self._new_path()
        temp = temp_name(final)
        _write(self.storage, delta, temp)
        self.storage.rename(temp, final)
        self.committed((temp, final, delta))

    def consolidate(self, keep_after_ns: int | None = None) -> bool:
        """Past :data:`MAX_FILES` files: one file with every saved observation (those whose records all
        end before `keep_after_ns` left out), the others deleted. True when it rewrote."""
        with self._lock:
            if len(self._files) <= MAX_FILES:
                return False
            rows = [(*key, first, last, count) for key, (first, last, count) in self._saved.items()
                    if keep_after_ns is None or last is None or last >= keep_after_ns]
            old = list(self._files)
        schema = observation_schema()
        table = pa.Table.from_pylist([dict(zip(schema.names, row, strict=True)) for row in rows], schema=schema)
        final = self._new_path()
        temp = temp_name(final)
        _write(self.storage, table, temp)
        self.storage.rename(temp, final)
        for path in old:
            self.storage.delete(path)
        with self._lock:
            self._files = [final, *(p for p in self._files if p not in old)]
            self._saved = {}
            self._remember(table)
        log.info("identity map: %d file(s) merged into %s (%d observation(s))", len(old), final, table.num_rows)
        return True

    # --- internals ------------------------------------------------------------------------------
    def _is_new(self, row: tuple) -> bool:
        *key, first, last, _ = row
        saved = self._saved.get(tuple(key))
        if saved is None:
            return True
        saved_first, saved_last, _ = saved
        return (_grew(first, saved_first, -1)) or (_grew(last, saved_last, 1))

    def _remember(self, table: pa.Table) -> None:
        for row in _rows(table):
            *key, first, last, count = row
            key = tuple(key)
            old = self._saved.get(key)
            if old is not None:
                first = _pick(min, first, old[0])
                last = _pick(max, last, old[1])
                count += old[2]
            self._saved[key] = (first, last, count)

    def _new_path(self) -> str:
        return f"{self.storage.base}/{IDENTITY_DIR}/{self.storage.archive_id}-{self.storage.next_seq()}{IDENTITY_SUFFIX}"

    def __len__(self) -> int:
        return len(self._saved)


def pop_notices(table: pa.Table) -> tuple[pa.Table, list[Group]]:
    """(the table without the identity notices' metadata, the notices); ValueError for a malformed one."""
    raw = (table.schema.metadata or {}).get(NOTICES_METADATA_KEY)
    return (table, []) if raw is None else (without_notices(table), parse_notices(raw))


def without_notices(table: pa.Table) -> pa.Table:
    meta = table.schema.metadata or {}
    if NOTICES_METADATA_KEY not in meta:
        return table
    return table.replace_schema_metadata({k: v for k, v in meta.items() if k != NOTICES_METADATA_KEY} or None)


def _rows(table: pa.Table) -> list[tuple]:
    columns = [table.column(name).to_pylist() for name in (*OBSERVED, "first_ns", "last_ns", "records")]
    return list(zip(*columns, strict=True))


def _grew(new: int | None, saved: int | None, direction: int) -> bool:
    """Whether a span end moved outwards by more than the slack (a span appearing counts)."""
    if new is None:
        return False
    if saved is None:
        return True
    return (new - saved) * direction > SPAN_SLACK_NS


def _pick(choose, a: int | None, b: int | None) -> int | None:
    known = [v for v in (a, b) if v is not None]
    return choose(known) if known else None


def _write(storage: Storage, table: pa.Table, path: str) -> None:
    storage.make_parent(path)
    with storage.fs.open_output_stream(path) as sink:
        pq.write_table(table, sink, compression="zstd")
    storage.sync_file(path)
