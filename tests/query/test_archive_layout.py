"""Archive specifics: partition pruning, dedup across archive instances, the trace index."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ranklog.query import engine, trace_index
from ranklog.query.filters import QuerySpec
from ranklog.query.sources import open_source
from ranklog.record import ts_ns
from tests.helpers.corpus import generate
from tests.helpers.query_data import write_archive
from tests.query.reference import expected_keys, keys_of

HOUR = 3600 * 10**9


@pytest.fixture(scope="module")
def corpus() -> pa.Table:
    return generate(8000, span_s=5 * 3600, hosts=2, ranks_per_host=4, seed=3)


def test_time_range_lists_only_overlapping_partitions(corpus, tmp_path):
    write_archive(corpus, tmp_path)
    source = open_source(archive=str(tmp_path))
    start = int(ts_ns(corpus["ts"]).min())
    all_hours = {f.partition for f in source.list_files()}
    one = {f.partition for f in source.list_files(start + HOUR, start + HOUR + 1)}
    assert len(all_hours) >= 5 and len(one) == 1
    (tmp_path / "date=2026-12-02" / "hour=13" / ".a1-9.parquet.tmp").write_bytes(b"partial")
    (tmp_path / "_ranklog" / "state").mkdir(parents=True)
    assert all(not Path(f.path).name.startswith((".", "_")) for f in source.list_files())


def test_failover_duplicates_are_returned_once(corpus, tmp_path):
    """An agent that failed over had one batch stored by two archives: each record comes back once."""
    write_archive(corpus, tmp_path, archive_id="archive-a")
    overlap = corpus.slice(2000, 1500)
    write_archive(overlap, tmp_path, archive_id="archive-b")
    source = open_source(archive=str(tmp_path))
    for spec in (QuerySpec(), QuerySpec(order=()), QuerySpec(levels=("ERROR",)), QuerySpec(order=("-ts",))):
        got = engine.read(source, spec)
        assert keys_of(got) == expected_keys(corpus, spec) if spec.order else \
            sorted(keys_of(got)) == sorted(expected_keys(corpus, spec))
        assert engine.count(source, spec) == len(expected_keys(corpus, spec))


def test_trace_index_finds_traces_and_never_goes_stale(corpus, tmp_path):
    write_archive(corpus, tmp_path, files_per_hour=3)
    source = open_source(archive=str(tmp_path))
    trace = pc.drop_null(corpus["trace_id"])[0].as_py()
    spec = QuerySpec(trace_ids=(trace,))
    files = engine.select_files(source, spec)
    records = len(expected_keys(corpus, spec))
    assert 0 < len(files) <= records and len(files) < len(source.list_files())
    assert keys_of(engine.read(source, spec)) == expected_keys(corpus, spec)
    index_dir = tmp_path / trace_index.INDEX_DIR
    assert sorted(os.listdir(index_dir))[0].startswith("date=")
    # A new file (a later flush) holding the trace is found although the index does not cover it yet.
    late = corpus.slice(10, 1).set_column(corpus.schema.get_field_index("offset"), "offset",
                                          pa.array([10**12], pa.int64()))
    late = late.set_column(late.schema.get_field_index("trace_id"), "trace_id", pa.array([trace]))
    write_archive(late, tmp_path, archive_id="a1")
    assert engine.read(source, spec).num_rows == len(expected_keys(corpus, spec)) + 1
    # Compaction replaces files: the answer stays right.
    hour_dir = Path(engine.select_files(source, spec)[0].path).parent
    merged = pa.concat_tables([pa.parquet.read_table(p) for p in sorted(hour_dir.glob("*.parquet"))])
    for path in hour_dir.glob("*.parquet"):
        path.unlink()
    write_archive(merged, tmp_path, archive_id="a1")
    assert engine.read(source, spec).num_rows == len(expected_keys(corpus, spec)) + 1


def test_read_only_archive_uses_an_in_memory_index(corpus, tmp_path):
    write_archive(corpus, tmp_path)
    os.chmod(tmp_path, 0o555)
    try:
        source = open_source(archive=str(tmp_path))
        trace = pc.drop_null(corpus["trace_id"])[5].as_py()
        spec = QuerySpec(trace_ids=(trace,))
        assert keys_of(engine.read(source, spec)) == expected_keys(corpus, spec)
        if os.geteuid() != 0:
            assert not (tmp_path / trace_index.INDEX_DIR).exists()
    finally:
        os.chmod(tmp_path, 0o755)
