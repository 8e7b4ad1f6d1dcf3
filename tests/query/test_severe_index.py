"""The severe-rows index: searches answer exactly as without it, it spares opening data files, and
it never goes stale (new files, compacted-away files, deleted files; written or in memory)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from ranklog.query import engine
from ranklog.query.filters import QuerySpec
from ranklog.query.severe_index import SEVERE_INDEX, plan_days
from ranklog.query.sources import open_source
from ranklog.query.text_search import search_literals
from ranklog.record import ts_ns
from tests.helpers.corpus import generate
from tests.helpers.query_data import write_archive
from tests.query.reference import expected_keys, keys_of

PAST_NS = 1_764_547_200 * 10**9  # 2025-12-01T00:00:00Z
HOUR = 3600 * 10**9
WATCHDOG = QuerySpec(regex=r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=[0-9]+")
SPECS = {
    "severe regex": WATCHDOG,
    "severe substring, host and window": QuerySpec(contains="CUDA", hosts=("gpu-node-001",),
                                                   start_ns=PAST_NS + 5 * HOUR, end_ns=PAST_NS + 30 * HOUR),
    "bulk regex, descending": QuerySpec(regex="loss[=:] ?[0-9]", order=("-ts",)),
    "any order": QuerySpec(contains="Watchdog caught", order=()),
    "absent": QuerySpec(contains="no such message anywhere"),
}


@pytest.fixture(scope="module")
def corpus() -> pa.Table:
    return generate(30_000, start_ns=PAST_NS, span_s=2 * 86400, hosts=2, ranks_per_host=4, seed=11)


def _answers(source, corpus: pa.Table, spec: QuerySpec) -> None:
    got = engine.read(source, spec)
    expected = expected_keys(corpus, spec)
    assert (keys_of(got) if spec.order else sorted(keys_of(got))) == (expected if spec.order else sorted(expected))
    assert engine.count(source, spec) == len(expected)


@pytest.mark.parametrize("name", list(SPECS))
def test_indexed_searches_answer_like_the_reference(corpus, tmp_path, name):
    write_archive(corpus, tmp_path)
    source = open_source(archive=str(tmp_path))
    _answers(source, corpus, SPECS[name])
    assert (len(expected_keys(corpus, SPECS[name])) > 0) == (name != "absent")
    assert sorted(os.listdir(tmp_path / "_ranklog_index" / "severe")) == ["date=2025-12-01.rlindex",
                                                                          "date=2025-12-02.rlindex"]


def test_a_failure_search_opens_no_data_file(corpus, tmp_path):
    """The watchdog message only occurs at ERROR: the index alone answers, every file is skipped."""
    write_archive(corpus, tmp_path)
    source = open_source(archive=str(tmp_path))
    plans = plan_days(source, source.list_files(), search_literals(WATCHDOG))
    assert len(plans) == 2
    assert all(groups == [] for plan in plans.values() for groups in plan.row_groups.values())
    assert sum(len(plan.covered) for plan in plans.values()) == len(source.list_files()) == 48
    # The day's ERROR/CRITICAL rows sit in the index file, ordered by message template.
    index = pq.read_table(tmp_path / "_ranklog_index" / "severe" / "date=2025-12-01.rlindex")
    first_day = corpus.filter(pa.array(ts_ns(corpus["ts"]) < PAST_NS + 24 * HOUR))
    severe = pc.is_in(first_day["level"], pa.array(["ERROR", "CRITICAL"]))
    assert index.num_rows == pc.sum(severe).as_py() > 0
    templates = [re.sub("[0-9]+", "#", text) for text in index["msg"].to_pylist()]
    assert templates == sorted(templates)


def test_the_index_never_goes_stale(corpus, tmp_path):
    write_archive(corpus, tmp_path)
    source = open_source(archive=str(tmp_path))
    _answers(source, corpus, WATCHDOG)  # builds the index
    # A later flush (no text index, not covered) holding a match is found.
    row = pc.indices_nonzero(pc.match_substring(corpus["msg"], "Watchdog caught"))[0].as_py()
    late = corpus.slice(row, 1)
    late = late.set_column(late.schema.get_field_index("offset"), "offset", pa.array([10**12], pa.int64()))
    write_archive(late, tmp_path, archive_id="late", files_per_hour=2)
    grown = pa.concat_tables([corpus, late.cast(corpus.schema)])
    _answers(source, grown, WATCHDOG)
    # Compaction replaces an hour's files by one new file: nothing lost, nothing twice.
    hour_dir = Path(source.list_files()[3].path).parent
    merged = pa.concat_tables([pq.read_table(p) for p in sorted(hour_dir.glob("*.parquet"))])
    for path in hour_dir.glob("*.parquet"):
        path.unlink()
    write_archive(merged, tmp_path, archive_id="compactor")
    _answers(source, grown, WATCHDOG)
    # Retention deletes a covered file: its rows are gone from the answer too.
    gone = Path(source.list_files()[10].path)
    dropped = pq.read_table(gone)
    gone.unlink()
    keys = set(zip(dropped["source_id"].to_pylist(), dropped["offset"].to_pylist(), strict=True))
    keep = pa.array([(s, o) not in keys for s, o in zip(grown["source_id"].to_pylist(), grown["offset"].to_pylist(),
                                                        strict=True)])
    _answers(source, grown.filter(keep), WATCHDOG)


def test_without_a_writable_root_searches_read_the_files(corpus, tmp_path, monkeypatch):
    """No disk for the index (object storage, read-only root): the same answers, no index kept."""
    write_archive(corpus, tmp_path)
    monkeypatch.setattr(SEVERE_INDEX, "path", lambda source, date: None)
    source = open_source(archive=str(tmp_path))
    assert plan_days(source, source.list_files(), search_literals(WATCHDOG)) == {}
    for spec in (WATCHDOG, SPECS["severe substring, host and window"]):
        _answers(source, corpus, spec)
    assert not (tmp_path / "_ranklog_index" / "severe").exists() and not SEVERE_INDEX._memory


def test_a_damaged_index_is_rebuilt(corpus, tmp_path):
    write_archive(corpus, tmp_path)
    source = open_source(archive=str(tmp_path))
    _answers(source, corpus, WATCHDOG)
    for path in (tmp_path / "_ranklog_index" / "severe").glob("*.rlindex"):
        path.write_bytes(b"not parquet")
    _answers(source, corpus, WATCHDOG)
    for path in (tmp_path / "_ranklog_index" / "severe").glob("*.rlindex"):
        assert pq.read_table(path).num_rows > 0
