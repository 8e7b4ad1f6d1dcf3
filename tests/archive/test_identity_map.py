"""The source → identity map the archive writes as it ingests, and the join every reader makes with it:
records stored before their writer's rank was known come back with it — through ``ranklog query``,
the Loki API and ``/v1/query`` of a real archive process.

The records are a real Ray worker's (tests/scenarios/ray_verl_worker_group), parsed file by file as an
agent does and shipped in the order an agent would meet them: the worker's ``.out`` (two marker
lines), its core-worker log and the ``.err``'s marker lines first — none names a rank — then the
``.err``'s JSON lines that say ``[Rank 1]`` and the actor's name.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import duckdb
import httpx
import pyarrow as pa
import pytest

from ranklog.archive.identity_map import MAX_FILES, IdentityMap
from ranklog.archive.storage import Storage
from ranklog.archive_layout import IDENTITY_DIR, IDENTITY_SUFFIX
from ranklog.parse import SourceContext, detect, parse
from ranklog.query import engine
from ranklog.query.filters import QuerySpec
from ranklog.query.follow import follow
from ranklog.query.sources import open_source
from ranklog.record import arrow_schema
from ranklog.source_identity import map_files, read_map
from tests.helpers.archive_proc import arrow_body, read_archive

LOGS = next((Path(__file__).resolve().parents[1] / "scenarios" / "ray_verl_worker_group" / "out" / "vm").glob(
    "session_*/logs"))
PID = 10160
SPEC = QuerySpec(order=("ts",))


def _parsed(path: Path) -> tuple[pa.Table, pa.Table]:
    """The file's records as an agent parses it (host ``vm``), cut after its marker lines."""
    found = detect(str(path))
    ctx = SourceContext(source=str(path), source_id=f"vm:{path.name}", format=found.format, host="vm",
                        ip="192.0.2.2", fields=dict(found.fields), mtime_ns=path.stat().st_mtime_ns)
    data = path.read_bytes()
    cut = data.index(b"\n{") + 1 if b"\n{" in data else len(data)
    first = parse(data[:cut], 0, ctx, final=True, read_time_ns=time.time_ns())
    second = parse(data[cut:], cut, ctx, final=True, read_time_ns=time.time_ns())
    return (pa.Table.from_batches([first.batch], arrow_schema()), pa.Table.from_batches([second.batch], arrow_schema()))


def _worker() -> tuple[pa.Table, pa.Table]:
    """(what the agent ships before the rank is known, what it ships after)."""
    out = _parsed(next(LOGS.glob(f"worker-*-{PID}.out")))
    core = _parsed(next(LOGS.glob(f"python-core-worker-*_{PID}.log")))
    err = _parsed(next(LOGS.glob(f"worker-*-{PID}.err")))
    before = pa.concat_tables([*out, *core, err[0]])
    assert before.column("rank").null_count == before.num_rows
    return before, err[1]


def _ingest(archive, table: pa.Table) -> None:
    answer = httpx.post(f"{archive.url}/v1/ingest", content=arrow_body(table), headers=archive.headers(), timeout=30)
    assert answer.status_code == 200, answer.text


def _flushed(root: Path, rows: int) -> None:
    deadline = time.monotonic() + 30
    while read_archive(root).num_rows < rows:
        assert time.monotonic() < deadline, "not flushed"
        time.sleep(0.2)


@pytest.fixture
def archive_with_worker(start_archive, tmp_path):
    archive = start_archive()
    before, after = _worker()
    _ingest(archive, before)
    _flushed(tmp_path / "archive", before.num_rows)
    _ingest(archive, after)
    _flushed(tmp_path / "archive", before.num_rows + after.num_rows)
    return archive, tmp_path / "archive", before.num_rows + after.num_rows


def test_records_stored_before_their_rank_was_known_come_back_with_it(archive_with_worker):
    _archive, root, total = archive_with_worker
    source = open_source(archive=str(root))
    everything = engine.read(source, SPEC)
    assert everything.num_rows == total
    assert set(everything.column("rank").to_pylist()) == {1}
    assert set(everything.column("role").to_pylist()) == {"kZ3xWqWorkerDict_0:1"}  # over the marker's class name
    stored = read_archive(root)
    assert stored.column("rank").null_count > 0  # the Parquet files keep what was shipped
    ranked = engine.read(source, QuerySpec(ranks=(1,), order=("ts",)))
    assert ranked.num_rows == total
    assert engine.count(source, QuerySpec(ranks=(1,))) == total
    assert engine.read(source, QuerySpec(ranks=(2,))).num_rows == 0
    searched = engine.read(source, QuerySpec(ranks=(1,), contains="Constructing CoreWorkerProcess"))
    assert searched.num_rows == 1 and searched.column("rank").to_pylist() == [1]
    assert engine.read(source, QuerySpec(pids=(PID,), ranks=(1,), levels=("INFO",))).num_rows > 0


def test_loki_and_v1_query_answer_with_the_joined_identity(archive_with_worker):
    archive, _root, total = archive_with_worker
    headers = {"Authorization": f"Bearer {archive.token}"}

    def loki(query: str) -> int:
        answer = httpx.get(f"{archive.url}/loki/api/v1/query_range", headers=headers, timeout=30, params={
            "query": query, "start": "0", "end": str(time.time_ns()), "limit": "5000"})
        answer.raise_for_status()
        return sum(len(stream["values"]) for stream in answer.json()["data"]["result"])

    assert loki('{rank="1"}') == total
    assert loki('{rank=~"1|3"}') == total
    assert loki('{rank!="1"}') == 0
    assert loki('{role="kZ3xWqWorkerDict_0:1"}') == total
    assert loki('{role="WorkerDict"}') == 0
    values = httpx.get(f"{archive.url}/loki/api/v1/label/rank/values", headers=headers, timeout=30,
                       params={"start": "0", "end": str(time.time_ns())}).json()["data"]
    assert values == ["1"]
    lines = httpx.get(f"{archive.url}/v1/query", headers=headers, timeout=30,
                      params={"rank": "1", "columns": "rank,source"}).text.splitlines()
    assert len(lines) == total and {json.loads(line)["rank"] for line in lines} == {1}


def test_the_map_sits_beside_the_data_out_of_every_parquet_glob_and_is_not_rewritten_after_a_restart(
        archive_with_worker):
    archive, root, total = archive_with_worker
    files = sorted((root / IDENTITY_DIR).glob(f"*{IDENTITY_SUFFIX}"))
    assert 1 <= len(files) <= 2  # a file per flush that brought something new
    assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{root}/**/*.parquet', hive_partitioning=true)"
                      ).fetchall() == [(total,)]
    archive.restart()
    before, after = _worker()
    _ingest(archive, pa.concat_tables([before, after]))  # duplicates: nothing new, no new map file
    time.sleep(2.5)
    assert sorted((root / IDENTITY_DIR).glob(f"*{IDENTITY_SUFFIX}")) == files


def test_many_map_files_are_merged_into_one_and_expired_observations_dropped(tmp_path):
    storage = Storage(str(tmp_path), "a1")
    identity = IdentityMap(storage)
    before, after = _worker()
    rows = pa.concat_tables([before, after])

    def add(names: range) -> None:
        for i in names:
            table = rows.set_column(rows.schema.get_field_index("source_id"), "source_id",
                                    pa.array([f"src-{i}"] * rows.num_rows, pa.string()))
            prepared = identity.prepare(table)
            storage.rename(prepared[0], prepared[1])
            identity.committed(prepared)
            assert identity.prepare(table) is None  # nothing new

    add(range(MAX_FILES))
    assert not identity.consolidate()  # not too many files yet
    add(range(MAX_FILES, MAX_FILES + 1))
    first_ns = min(rows.column("ts").cast(pa.int64()).to_pylist()) * 1000
    assert identity.consolidate(first_ns)
    files = map_files(storage.fs, storage.base)
    assert len(files) == 1
    assert len(set(read_map(storage.fs, files).column("source_id").to_pylist())) == MAX_FILES + 1
    reloaded = IdentityMap(storage)
    reloaded.load()
    assert len(reloaded) == len(identity)
    add(range(MAX_FILES + 1, 2 * MAX_FILES + 2))
    assert identity.consolidate(time.time_ns())  # every record ended before: only the span-less stay
    merged = read_map(storage.fs, map_files(storage.fs, storage.base))
    assert merged.num_rows and merged.column("last_ns").null_count == merged.num_rows


def _moved(table: pa.Table, by_us: int) -> pa.Table:
    """`table` with every time moved by `by_us` microseconds (spans and gaps kept)."""
    import pyarrow.compute as pc

    ts = table.column("ts")
    moved = pc.add(ts.cast(pa.int64()), by_us).cast(ts.type)
    return table.set_column(table.schema.get_field_index("ts"), "ts", moved)


def test_follow_shows_new_records_with_what_the_map_already_knows(start_archive, tmp_path):
    """``ranklog query --archive ROOT -f --rank 1``: the worker's ``.out`` and core-worker lines
    stored after its ``.err`` named the rank arrive as rank 1's, though none of them says so."""
    archive = start_archive()
    root = tmp_path / "archive"
    before, after = _worker()
    # the run a minute ago, in the partitions a follow lists (lines stamped with the file's mtime,
    # the checkout's time, land later: a follow lists those too)
    by_us = time.time_ns() // 1000 - 60_000_000 - max(after.column("ts").cast(pa.int64()).to_pylist())
    before, after = _moved(before, by_us), _moved(after, by_us)
    _ingest(archive, after)
    _flushed(root, after.num_rows)
    stop = threading.Event()
    looks = follow(open_source(archive=str(root)), QuerySpec(ranks=(1,)), ["source", "offset", "rank", "role"], 0,
                   interval=0.1, stop=stop, heartbeat=True)
    try:
        next(looks)  # the tail (none asked): from here on, what is stored is new
        _ingest(archive, before)
        rows: list[dict] = []
        deadline = time.monotonic() + 30
        while len(rows) < before.num_rows and time.monotonic() < deadline:
            rows += next(looks).to_pylist()
    finally:
        stop.set()
        looks.close()
    assert len(rows) == before.num_rows
    assert {row["rank"] for row in rows} == {1}
    assert {row["role"] for row in rows} == {"kZ3xWqWorkerDict_0:1"}
