"""An alert's triage reads the recent window's partitions only, not the archive.

A real archive holds two days old records of other jobs (the corpus) and, in the current hour, the
``torchrun_cuda_oom`` scenario's records as ranklog parses them, moved to start 30 minutes ago. The verdict service's triage (:func:`ranklog.archive.verdicts.judge.judge`) for
the job over the last hour opens only that hour's files and names the scenario's root cause.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.compute as pc

from ranklog.archive.verdicts.judge import judge
from ranklog.query.engine import read
from ranklog.query.filters import QuerySpec
from ranklog.query.sources import ArchiveSource, LogDirSource
from ranklog.record import ts_array, ts_ns
from tests.helpers.archive_proc import arrow_body
from tests.helpers.net import wait_until
from tests.scenarios.library import restore_mtimes

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "torchrun_cuda_oom"
TRUTH = json.loads((SCENARIO / "truth.json").read_text())


def _scenario_now() -> pa.Table:
    restore_mtimes(SCENARIO)  # timeless lines take their file's mtime, which git does not keep
    table = read(LogDirSource(str(SCENARIO / "out")), QuerySpec(order=()))
    ns = ts_ns(table["ts"])
    # From 30 minutes ago on (lines without a printed time carry their file's mtime: the span may be long).
    moved = ns - int(ns.min()) + time.time_ns() - 1800 * 10**9
    return table.set_column(table.schema.get_field_index("ts"), "ts", ts_array(moved))


def test_triage_for_an_alert_opens_only_the_windows_files(start_archive, small_corpus) -> None:
    archive = start_archive()
    for table in (small_corpus, _scenario_now()):
        answer = httpx.post(f"{archive.url}/v1/ingest", content=arrow_body(table), headers=archive.headers(),
                            timeout=60)
        assert answer.status_code == 200, answer.text
    source = ArchiveSource.open(str(archive.root))
    wait_until(lambda: len({f.date for f in source.list_files()}) >= 2, 30, "both days flushed")
    everything = source.list_files()
    start = time.time_ns() - 3600 * 10**9
    judgement = judge(str(archive.root), None, "job", start)
    assert 0 < judgement.files == len(source.list_files(start, None)) < len(everything)
    verdict = judgement.triage.verdict
    assert (verdict.ranks, verdict.category, verdict.step) == ([TRUTH["rank"]], TRUTH["category"], TRUTH["step"])
    assert judgement.triage.job == "job" and not pc.any(pc.equal(small_corpus["job"], "job")).as_py()
