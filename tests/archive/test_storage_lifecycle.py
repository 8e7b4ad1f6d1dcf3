"""Compaction and retention on real files and real processes, including kill -9 mid-compaction."""

from __future__ import annotations

import json
import random
import re
import signal
import time

import httpx
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from ranklog.archive import journal
from ranklog.archive.compaction import compact, plan
from ranklog.archive.leases import LocalLeaseStore
from ranklog.archive.parquet_writer import SORT_KEYS, is_compacted, write_parquet
from ranklog.archive.replacement import HourOwner
from ranklog.archive.storage import Storage, temp_name, write_atomic
from ranklog.archive_layout import HOUR_NS, SEVERE_LEVELS
from ranklog.query import engine
from ranklog.query.filters import QuerySpec
from ranklog.query.sources import open_source
from ranklog.record import arrow_schema, rows_to_table
from tests.helpers.archive_proc import read_archive

from .conftest import PAST_NS
from .util import by_key, metric, post_table, wait_rows

DAY = 86400



def row_sort_key(row: dict) -> tuple:
    """The position the compacted sort order gives one record: severe levels first, then SORT_KEYS."""
    return (row["level"] not in SEVERE_LEVELS, *(row[key] for key in SORT_KEYS))

def _hour_files(root, hour_ns: int = PAST_NS) -> list:
    from ranklog.archive_layout import partition_dir

    return sorted((root / partition_dir(hour_ns // HOUR_NS)).glob("*.parquet"))


def _ingest_as_small_files(archive, table: pa.Table, batches: int) -> None:
    size = -(-table.num_rows // batches)
    for start in range(0, table.num_rows, size):
        post_table(archive, table.slice(start, size))
        expected = min(start + size, table.num_rows)
        assert wait_rows(archive.root, expected).num_rows == expected  # one flush (file) per batch


@pytest.mark.slow
def test_closed_hours_are_compacted_into_one_sorted_file(start_archive):
    from tests.helpers.corpus import generate

    table = generate(6000, start_ns=PAST_NS, span_s=3000, hosts=2, ranks_per_host=4, seed=11)
    archive = start_archive("--flush-interval", "100ms", "--compaction-delay", "100d")
    _ingest_as_small_files(archive, table, 4)
    assert len(_hour_files(archive.root)) == 4
    archive.stop()
    archive.extra_args = ("--archive-id", "t1", "--compaction-delay", "0s", "--compaction-interval", "200ms")
    archive.start()
    deadline = time.monotonic() + 20
    while len(_hour_files(archive.root)) != 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    files = _hour_files(archive.root)
    assert len(files) == 1
    merged = pq.read_table(files[0])
    order = merged.select(list(SORT_KEYS)).to_pylist()
    assert order == sorted(order, key=row_sort_key)
    assert by_key(read_archive(archive.root)).equals(by_key(table))
    assert metric(archive, "ranklog_archive_compactions_total") == 1
    time.sleep(1.0)  # five more compaction passes: the small compacted file is left alone
    assert _hour_files(archive.root) == files and metric(archive, "ranklog_archive_compactions_total") == 1


@pytest.mark.parametrize("target", [128 * 10**6, 1000], ids=["small-file", "file-above-half-the-target"])
def test_a_lone_flush_file_is_compacted_once(tmp_path, target):
    """An hour one flush covered still gets sorted and recompressed — and only once, whether the
    flush file is small or as large as a compaction output."""
    from tests.helpers.corpus import generate

    storage = Storage(str(tmp_path / "root"), "t1")
    table = generate(5000, start_ns=PAST_NS, span_s=3000, hosts=2, ranks_per_host=4, seed=12)
    flushed = storage.new_file_path(PAST_NS // HOUR_NS)
    write_parquet(storage, table, temp_name(flushed))
    storage.rename(temp_name(flushed), flushed)
    now, state = PAST_NS / 1e9 + 3 * 3600, tmp_path / "state"
    state.mkdir()
    owner = HourOwner(storage, LocalLeaseStore(storage.base), 60.0, str(state))
    assert compact(storage, owner, now, delay=600, target=target) == 1
    [stored] = storage.list_files(own_only=True)
    assert stored.path != flushed and is_compacted(storage, stored.path)
    merged = pq.read_table(stored.path)
    order = merged.select(list(SORT_KEYS)).to_pylist()
    assert order == sorted(order, key=row_sort_key)
    assert by_key(merged).equals(by_key(table))
    assert compact(storage, owner, now, delay=600, target=target) == 0
    assert [f.path for f in storage.list_files(own_only=True)] == [stored.path]


@pytest.mark.parametrize("how", ["scan", "count"])
def test_a_query_whose_files_compaction_replaced_after_it_listed_them_lists_again(tmp_path, monkeypatch, how):
    """The archive's compaction racing a query (a clean-clone `make test` caught it: `ranklog triage
    --archive` got 500, FileNotFoundError on a flush file): the query lists an hour's two flush files,
    compaction merges them into one and deletes them, then the query opens them. It lists again and
    answers every record once."""
    import os

    from tests.helpers.corpus import generate

    storage = Storage(str(tmp_path / "root"), "t1")
    table = generate(3000, start_ns=PAST_NS, span_s=3000, hosts=2, ranks_per_host=4, seed=13)
    for part in (table.slice(0, 1500), table.slice(1500)):
        flushed = storage.new_file_path(PAST_NS // HOUR_NS)
        write_parquet(storage, part, temp_name(flushed))
        storage.rename(temp_name(flushed), flushed)
    state = tmp_path / "state"
    state.mkdir()
    owner = HourOwner(storage, LocalLeaseStore(storage.base), 60.0, str(state))
    source = open_source(archive=str(tmp_path / "root"))
    listings: list[list] = []
    list_files = type(source).list_files

    def list_then_compact(self, *args, **kwargs):
        files = list_files(self, *args, **kwargs)
        if not listings:  # compaction lands between the first listing and the opening of its files
            assert compact(storage, owner, PAST_NS / 1e9 + 3 * 3600, delay=600, target=128 * 10**6) == 1
        listings.append([f.path for f in files])
        return files

    monkeypatch.setattr(type(source), "list_files", list_then_compact)
    if how == "scan":
        assert by_key(engine.read(source, QuerySpec())).equals(by_key(table))
    else:
        assert engine.count(source, QuerySpec()) == table.num_rows
    assert len(listings) == 2 and len(listings[0]) == 2 and len(listings[1]) == 1
    assert not any(os.path.exists(path) for path in listings[0])


def test_a_streaming_scan_that_already_sent_rows_fails_saying_its_hour_was_replaced(tmp_path):
    """Past its first batch a scan cannot start over without sending rows twice: when compaction
    replaces files it has yet to open, it fails with an error that says so (and to run it again)."""
    from tests.helpers.corpus import generate

    storage = Storage(str(tmp_path / "root"), "t1")
    for hour, files in ((0, 8), (1, 2)):  # 10 files: the scan opens them in two chunks (CHUNK_FILES 8)
        start = PAST_NS + hour * HOUR_NS
        table = generate(400 * files, start_ns=start, span_s=3000, hosts=2, ranks_per_host=4, seed=14 + hour)
        for part in range(files):
            flushed = storage.new_file_path(start // HOUR_NS)
            write_parquet(storage, table.slice(part * 400, 400), temp_name(flushed))
            storage.rename(temp_name(flushed), flushed)
    state = tmp_path / "state"
    state.mkdir()
    owner = HourOwner(storage, LocalLeaseStore(storage.base), 60.0, str(state))
    batches = engine.scan(open_source(archive=str(tmp_path / "root")), QuerySpec(order=()))
    assert next(batches).num_rows
    assert compact(storage, owner, PAST_NS / 1e9 + 4 * 3600, delay=600, target=128 * 10**6) == 2
    with pytest.raises(FileNotFoundError, match=re.escape("replaced by the archive's compaction or retention while "
                                                          "this query read its hour (after rows were sent); run the "
                                                          "query again")):
        list(batches)


def test_files_of_an_older_archive_with_ns_ts_are_read_and_compacted_to_microseconds(tmp_path):
    """Archives before the switch to µs wrote `ts` as Parquet TIMESTAMP(NANOS). Such a file is read
    next to new ones; one whose times carry sub-µs digits is named in one clear error until
    compaction rewrites its hour as TIMESTAMP(MICROS) (what Spark and Trino read)."""
    from ranklog.errors import UserError
    from tests.helpers.corpus import generate

    root = tmp_path / "root"
    storage = Storage(str(root), "t1")
    table = generate(4000, start_ns=PAST_NS, span_s=3000, hosts=2, ranks_per_host=4, seed=13)

    def store(part: pa.Table, extra_ns: int = 0) -> None:
        nanos = part["ts"].cast(pa.int64()).to_numpy() * 1000 + extra_ns
        ts = pa.array(nanos).cast(pa.timestamp("ns", tz="UTC"))
        part = part.set_column(0, pa.field("ts", ts.type, nullable=False), ts)
        path = storage.new_file_path(PAST_NS // HOUR_NS)
        storage.make_parent(path)
        pq.write_table(part, temp_name(path))
        storage.rename(temp_name(path), path)

    store(table.slice(0, 2000))  # whole microseconds in a ns column: read as they are
    store(table.slice(2000))
    read = engine.read(open_source(archive=str(root)), QuerySpec())
    assert read.schema.field("ts").type == pa.timestamp("us", tz="UTC") and by_key(read).equals(by_key(table))

    store(generate(10, start_ns=PAST_NS, span_s=60, hosts=1, ranks_per_host=1, seed=14), extra_ns=789)
    with pytest.raises(UserError, match="nanoseconds with sub-microsecond digits"):
        engine.read(open_source(archive=str(root)), QuerySpec())
    state = tmp_path / "state"
    state.mkdir()
    owner = HourOwner(storage, LocalLeaseStore(storage.base), 60.0, str(state))
    assert compact(storage, owner, PAST_NS / 1e9 + 3 * 3600, delay=600, target=128 * 10**6) == 1
    [stored] = storage.list_files(own_only=True)
    parquet = pq.ParquetFile(stored.path)
    logical = parquet.schema.column(parquet.schema_arrow.get_field_index("ts")).logical_type.to_json()
    assert json.loads(logical)["timeUnit"] == "microseconds" and json.loads(logical)["isAdjustedToUTC"]
    assert parquet.metadata.num_rows == 4010
    assert engine.read(open_source(archive=str(root)), QuerySpec()).num_rows == 4010
    assert compact(storage, owner, PAST_NS / 1e9 + 3 * 3600, delay=600, target=128 * 10**6) == 0


def _kill_when(archive, appears, timeout: float = 20.0) -> bool:
    """SIGKILL the archive as soon as `appears()` is true (or at the timeout); True when it was seen."""
    deadline = time.monotonic() + timeout
    seen = False
    while time.monotonic() < deadline and not seen:
        seen = appears()
        if not seen:
            time.sleep(0.002)
    archive.stop(signal.SIGKILL)
    return seen


@pytest.mark.slow
def test_kill_9_during_compaction_loses_and_duplicates_nothing(start_archive):
    from tests.helpers.corpus import generate

    table = generate(30_000, start_ns=PAST_NS, span_s=3000, hosts=4, ranks_per_host=8, seed=12)
    archive = start_archive("--flush-interval", "100ms", "--compaction-delay", "100d")
    _ingest_as_small_files(archive, table, 6)
    state = archive.root / "_ranklog" / "t1"
    quiet = ("--archive-id", "t1", "--compaction-delay", "100d")
    compacting = ("--archive-id", "t1", "--compaction-delay", "0s", "--compaction-interval", "100ms")
    # Kill while the merged file is being written (uncommitted: rolled back), then right after the
    # commit in the hour's lease (rolled forward), then at a random moment.
    triggers = [lambda: bool(list(archive.root.glob("date=*/hour=*/.replace.t1-*.parquet.tmp"))),
                lambda: _pending_commit(archive.root),
                lambda: time.sleep(random.Random(5).uniform(0, 1.5)) or True]
    caught = []
    for trigger in triggers:
        archive.stop()
        archive.extra_args = compacting
        archive.start()
        caught.append(_kill_when(archive, trigger))
        archive.extra_args = quiet
        archive.start()  # recovery only: rolls the journal forward or drops the uncommitted output
        stored = read_archive(archive.root)
        assert stored.num_rows == table.num_rows
        assert by_key(stored).equals(by_key(table))
        assert not list(archive.root.glob("date=*/hour=*/.*.tmp"))
        assert not _pending_commit(archive.root)
        held = state / "held_hours.json"
        assert not held.exists() or not json.loads(held.read_text())
    assert caught[0], "never saw the compaction output being written"
    # Finally let it finish: one file per hour, same rows.
    archive.stop()
    archive.extra_args = compacting
    archive.start()
    deadline = time.monotonic() + 30
    while len(_hour_files(archive.root)) != 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(_hour_files(archive.root)) == 1
    assert by_key(read_archive(archive.root)).equals(by_key(table))


def _pending_commit(root) -> bool:
    """A replacement committed in an hour's lease but not finished yet."""
    for path in root.glob("date=*/hour=*/_ranklog_lease.json"):
        try:
            commits = json.loads(path.read_text()).get("commits", [])
        except ValueError:
            continue
        if any(not commit["done"] for commit in commits):
            return True
    return False


def _small_table(rows: list[tuple[int, str, int]]) -> pa.Table:
    """Records (ts ns, level, offset) of one source."""
    return rows_to_table([{"ts": ts, "level": level, "msg": f"row {offset}", "host": "h1", "ip": "10.0.0.1",
                           "source": "/x", "source_id": "sid", "offset": offset, "format": "text"}
                          for ts, level, offset in rows])


def test_journal_recovery_at_every_crash_point(tmp_path):
    storage = Storage(str(tmp_path / "root"), "t1")
    state = tmp_path / "state"
    state.mkdir()
    hour = PAST_NS // HOUR_NS
    inputs = []
    for offset in range(3):
        path = storage.new_file_path(hour)
        write_parquet(storage, _small_table([(PAST_NS + offset, "INFO", offset)]), path)
        inputs.append(path)
    merged = _small_table([(PAST_NS + offset, "INFO", offset) for offset in range(3)])
    journal_path = str(state / journal.REPLACE_JOURNAL)

    def visible_offsets() -> list[int]:
        table = read_archive(tmp_path / "root")
        return sorted(table["offset"].to_pylist())

    # Crash 1: output written, journal not committed → output dropped, inputs stay.
    final = storage.new_file_path(hour)
    write_parquet(storage, merged, temp_name(final))
    journal.recover(storage, str(state))
    assert not storage.exists(temp_name(final)) and all(storage.exists(p) for p in inputs)
    assert visible_offsets() == [0, 1, 2]
    # Crash 2: journal committed, nothing renamed → rolled forward.
    write_parquet(storage, merged, temp_name(final))
    write_atomic(journal_path, json.dumps({"files": [[temp_name(final), final]], "inputs": inputs}).encode())
    journal.recover(storage, str(state))
    assert storage.exists(final) and not any(storage.exists(p) for p in inputs)
    assert visible_offsets() == [0, 1, 2]
    assert journal.read(journal_path) is None
    # Crash 3: renamed and one input deleted, the rest not → finished, still exactly once.
    second = storage.new_file_path(hour)
    write_parquet(storage, merged, temp_name(second))
    write_atomic(journal_path, json.dumps({"files": [[temp_name(second), second]], "inputs": [final]}).encode())
    storage.rename(temp_name(second), second)
    journal.recover(storage, str(state))
    assert visible_offsets() == [0, 1, 2]


def test_compaction_plan_groups_small_files_of_closed_hours():
    from ranklog.archive.storage import StoredFile

    now = PAST_NS / 1e9 + 5 * 3600
    closed, open_ = PAST_NS / 1e9, now - 600
    files = [StoredFile(f"/r/a{i}.parquet", 40, closed) for i in range(5)]
    files += [StoredFile("/r/big.parquet", 900, closed), StoredFile("/r/o1.parquet", 10, open_),
              StoredFile("/r/o2.parquet", 10, open_)]
    groups = plan(files, now, delay=600, target=100, compacted=lambda path: True)
    assert [[f.path for f in g] for g in groups] == [["/r/a0.parquet", "/r/a1.parquet"],
                                                      ["/r/a2.parquet", "/r/a3.parquet"], ["/r/a4.parquet"]]
    # a large flush file (not a compaction output) is a candidate too, in a group of its own
    groups = plan(files, now, delay=600, target=100, compacted=lambda path: path != "/r/big.parquet")
    assert [[f.path for f in g] for g in groups][-2:] == [["/r/a4.parquet"], ["/r/big.parquet"]]


@pytest.mark.slow
def test_retention_tiers_with_an_injected_clock(start_archive, tmp_path):
    now = time.time()
    clock = tmp_path / "clock"
    clock.write_text(str(now))

    def ago(days: float) -> int:
        return int((now - days * DAY) // 3600 * 3600 * 1e9) + 5 * 10**9  # inside an hour

    rows = [(ago(1), "DEBUG", 1), (ago(5), "DEBUG", 2), (ago(5) + 1, "INFO", 3), (ago(40), "INFO", 4),
            (ago(40) + 1, "ERROR", 5), (ago(5) + 2, "ERROR", 6), (ago(100), "ERROR", 7), (ago(40) + 2, "DEBUG", 8)]
    archive = start_archive("--flush-interval", "100ms", "--clock-file", str(clock), "--retention-interval", "500ms",
                            "--retention-levels", "DEBUG=3d,ERROR=90d")
    post_table(archive, _small_table(rows))

    def offsets_eventually(expected: list[int]) -> None:
        deadline = time.monotonic() + 20
        got = None
        while time.monotonic() < deadline:
            try:
                got = sorted(read_archive(archive.root)["offset"].to_pylist())
            except FileNotFoundError:  # listed, then replaced by retention before it was read
                got = None
            if got == expected:
                return
            time.sleep(0.1)
        raise AssertionError(f"kept {got}, expected {expected}")

    # Now: DEBUG keeps 3 d, INFO (default) 30 d, ERROR 90 d.
    offsets_eventually([1, 3, 5, 6])
    assert metric(archive, "ranklog_archive_retention_deleted_files_total", 'level="DEBUG"') >= 1
    assert metric(archive, "ranklog_archive_retention_last_run_timestamp_seconds") == pytest.approx(now, abs=1)
    oldest_before = metric(archive, "ranklog_archive_oldest_partition_timestamp_seconds")
    # A search builds the query indexes, which copy records (the severe index, ERROR rows)...
    source = open_source(archive=str(archive.root))
    assert engine.count(source, QuerySpec(contains="row", levels=("ERROR",))) == 2
    indexes = list(archive.root.glob("_ranklog_index/*/date=*.rlindex"))
    assert {path.parent.name for path in indexes} == {"severe"} and len(indexes) >= 2
    # 60 days later only the 5-day-old ERROR is young enough (65 d < 90 d).
    clock.write_text(str(now + 60 * DAY))
    offsets_eventually([6])
    # ...so retention drops the index files of every day it changed: no expired row outlives it there.
    deadline = time.monotonic() + 20
    while any(path.exists() for path in indexes):
        assert time.monotonic() < deadline, f"index files kept: {[p for p in indexes if p.exists()]}"
        time.sleep(0.2)
    assert engine.count(source, QuerySpec(contains="row", levels=("ERROR",))) == 1
    deadline = time.monotonic() + 20
    while metric(archive, "ranklog_archive_oldest_partition_timestamp_seconds") == oldest_before:
        assert time.monotonic() < deadline, "oldest partition metric did not move"
        time.sleep(0.2)
    assert metric(archive, "ranklog_archive_oldest_partition_timestamp_seconds") == ago(5) // 10**9 // 3600 * 3600
    assert not list(archive.root.glob("date=*/hour=*/.*.tmp"))
    assert httpx.get(f"{archive.url}/readyz").status_code == 200
    assert pc.all(pc.is_in(read_archive(archive.root)["level"], value_set=pa.array(["ERROR"]))).as_py()
    assert arrow_schema().field("ts").type == read_archive(archive.root).schema.field("ts").type
