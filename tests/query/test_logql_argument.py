"""``ranklog query 'LOGQL'``: a LogQL log query as the positional argument, on every source, AND-ed
with the flags; the grammar is the archive's (ranklog.query.logql), so the CLI and Grafana agree."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.helpers.everyday_job import FAILING_RANK, LONG, RANKS
from tests.helpers.procs import ranklog_cmd


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(ranklog_cmd(*args), capture_output=True, text=True, timeout=180)


def records(*args: str) -> list[dict]:
    proc = run("query", *args, "--format", "ndjson", "--columns", "rank,level,msg,exc,offset,source")
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


@pytest.fixture(params=["archive", "log_dir"])
def where(request, everyday_job) -> list[str]:
    logs, archive, _ = everyday_job
    return ["--archive", str(archive)] if request.param == "archive" else ["--log_dir", str(logs)]


def test_selector_and_line_filter(where):
    found = records(f'{{rank="{FAILING_RANK}"}} |= "NCCL"', *where)
    assert len(found) == 1 and found[0]["rank"] == FAILING_RANK and found[0]["level"] == "CRITICAL"
    assert "ncclRemoteError" in found[0]["exc"]
    assert found == records("--rank", str(FAILING_RANK), "--contains", "NCCL", *where)


def test_regex_matchers_several_filters_and_flags_together(where):
    warnings = records('{rank=~"1|3", level="WARNING"} |= "checkpoint" != "part-999"', *where)
    assert sorted(r["rank"] for r in warnings) == [1, 3] and all(r["msg"] == LONG for r in warnings)
    assert records('{level=~"WARNING|CRITICAL"} |~ "NCCL|checkpoint"', "--rank", "0-1", *where) == \
        records('{level=~"WARNING|CRITICAL", rank=~"0|1"} |~ "NCCL|checkpoint"', *where)
    assert len(records("{}", "--level", "WARNING", *where)) == RANKS + 1  # a warning each, and the crash


@pytest.mark.parametrize(("query", "message"), [
    ('count_over_time({rank="2"}[5m])', "is a metric query"),
    ('{service="x"}', "no record has the label(s) service"),
    ('{rank="2"', "parse error at line 1"),
    ('{rank="2"} |~ "(unclosed"', "invalid regular expression"),
    ('{rank="2"} | json | step > 3', "need the archive's Loki API"),
])
def test_bad_queries_are_one_clear_line(query, message, everyday_job):
    _, archive, _ = everyday_job
    proc = run("query", query, "--archive", str(archive))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr
