"""`ranklog integrity` finds injected seq gaps and missing file heads; a clean archive passes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ranklog.query.filters import QuerySpec
from ranklog.query.integrity import check_integrity
from ranklog.query.sources import open_source
from ranklog.record import ts_ns
from tests.helpers.corpus import generate
from tests.helpers.procs import REPO, ranklog_cmd
from tests.helpers.query_data import write_archive


@pytest.fixture(scope="module")
def corpus() -> pa.Table:
    return generate(6000, span_s=3 * 3600, hosts=2, ranks_per_host=2, seed=11)


def _integrity(root: Path, *extra: str) -> tuple[int, dict]:
    proc = subprocess.run(ranklog_cmd("integrity", "--archive", str(root), "--json", *extra),
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_clean_archive_passes(corpus, tmp_path):
    write_archive(corpus, tmp_path, files_per_hour=2)
    code, report = _integrity(tmp_path)
    assert code == 0 and report["ok"], report
    assert report["records"] == 6000 and report["missing_records"] == 0 and report["processes"] == 4


def test_injected_gap_is_found_with_its_place(corpus, tmp_path):
    ranked = corpus.filter(pc.and_(pc.equal(corpus["rank"], 2), pc.is_valid(corpus["seq"])))
    seqs = ranked["seq"].to_pylist()
    lost = set(seqs[100:103])  # three consecutive records of one process never arrived
    keep = pc.invert(pc.and_(pc.equal(pc.fill_null(corpus["rank"], -1), 2),
                             pc.is_in(corpus["seq"], pa.array(sorted(lost), pa.int64()))))
    write_archive(corpus.filter(pc.fill_null(keep, True)), tmp_path)
    code, report = _integrity(tmp_path)
    assert code == 1 and not report["ok"]
    assert report["missing_records"] == 3 and report["seq_gap_count"] == 1
    gap = report["seq_gaps"][0]
    assert (gap["rank"], gap["after_seq"], gap["next_seq"], gap["missing"]) == (2, seqs[99], seqs[103], 3)
    assert gap["host"] == ranked["host"][0].as_py() and gap["pid"] == ranked["pid"][0].as_py()
    window_code, window = _integrity(tmp_path, "--rank", "0,1")
    assert window_code == 0 and window["ok"]


def test_missing_file_head_and_parse_errors(corpus, tmp_path):
    source_id = corpus["source_id"][0].as_py()
    first = pc.min(pc.filter(corpus["offset"], pc.equal(corpus["source_id"], source_id))).as_py()
    headless = corpus.filter(pc.invert(pc.and_(pc.equal(corpus["source_id"], source_id),
                                               pc.equal(corpus["offset"], first))))
    bad = headless.slice(0, 2)
    for name, values in (("format", pa.array(["text"] * 2)), ("seq", pa.nulls(2, pa.int64())),
                         ("offset", pa.array([10**9, 10**9 + 1], pa.int64())),
                         ("attrs", pa.array(['{"parse_error":"Expecting value"}'] * 2))):
        index = bad.schema.get_field_index(name)
        bad = bad.set_column(index, bad.schema.field(index), values)
    with_errors = pa.concat_tables([headless, bad])
    write_archive(with_errors, tmp_path)
    report = check_integrity(open_source(archive=str(tmp_path)), QuerySpec())
    assert not report["ok"] and report["offset_problem_count"] == 1
    assert report["offset_problems"][0]["source_id"] == source_id
    assert report["parse_error_total"] == 2
    windowed = check_integrity(open_source(archive=str(tmp_path)),
                               QuerySpec(start_ns=int(ts_ns(corpus["ts"]).min())))
    assert windowed["ok"] and not windowed["heads_checked"]
    assert _integrity(tmp_path, "--since", "3650d")[0] == 0
    assert _integrity(tmp_path, "--since", "3650d", "--fail-on-parse-errors")[0] == 1


def test_inferred_times_are_counted_per_source(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "train.log").write_text("2026-12-02 13:04:05,000 INFO train: step 1\nprinted line\nanother print\n")
    (logs / "console.log").write_text("no time here\nnor here\n")
    proc = subprocess.run(ranklog_cmd("integrity", "--log_dir", str(logs), "--json"),
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    report = json.loads(proc.stdout)
    assert report["inferred_ts_total"] == 4, report
    assert {Path(row["source"]).name: row["records"] for row in report["inferred_ts"]} == {"train.log": 2,
                                                                                         "console.log": 2}
