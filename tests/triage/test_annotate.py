"""``ranklog triage --annotate`` does not feed its own output back (issue 42): the verdict record it stores
in the archive is no log line, so the next query counts the same records and the next verdict is the
same. A real archive process serves the scenario's archive; the CLI runs as a user runs it."""

from __future__ import annotations

import json
import subprocess
import time

import httpx
import pyarrow.compute as pc
import pytest

from tests.helpers.archive_proc import read_archive, running_archive
from tests.helpers.procs import ranklog_cmd

from .scenarios import SCENARIOS
from .scenarios.archive import write_archive

pytestmark = pytest.mark.slow


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(ranklog_cmd(*args), capture_output=True, text=True, timeout=180)


def _count(root, *flags: str) -> int:
    done = _run("query", "--archive", str(root), "--count", *flags)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def _verdict(root) -> dict:
    done = _run("triage", "--archive", str(root), "--json")
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)["verdict"]


def _compacted(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while "ranklog_archive_compactions_total 1.0" not in httpx.get(f"{url}/metrics", timeout=10).text:
        assert time.monotonic() < deadline, "the archive never compacted the hour it was started on"
        time.sleep(0.3)


def test_an_annotated_verdict_changes_neither_counts_nor_the_next_verdict(tmp_path, token_file):
    root = tmp_path / "archive"
    write_archive(SCENARIOS["oom_one_rank"]().job.table(), root)
    errors, everything, first = _count(root, "--level", "ERROR"), _count(root), _verdict(root)
    with running_archive(root, token_file, extra_args=["--state-dir", str(tmp_path / "state")]) as archive:
        _compacted(archive.url)  # it rewrites the hour first: a read racing that is another test's business
        done = _run("triage", "--archive", str(root), "--annotate", archive.url, "--token-file", str(token_file))
        assert done.returncode in (0, 1), done.stderr
        deadline = time.monotonic() + 30
        while not pc.sum(pc.equal(read_archive(root)["format"], "triage")).as_py():
            assert time.monotonic() < deadline, "the annotation never reached the archive's files"
            time.sleep(0.3)
        # Grafana's annotation query still finds it
        now = time.time_ns()
        answer = httpx.get(f"{archive.url}/loki/api/v1/query_range", headers=archive.headers(),
                           params={"query": '{format="triage"}', "start": 0, "end": now, "limit": 10}, timeout=30)
        assert answer.status_code == 200, answer.text
        (stream,) = answer.json()["data"]["result"]
        assert stream["stream"]["level"] == "CRITICAL" and stream["stream"]["rank"] == "5"
    assert _count(root, "--level", "ERROR") == errors
    assert _count(root) == everything
    again = _verdict(root)
    assert (again["summary"], again["step"], again["ranks"]) == (first["summary"], first["step"], first["ranks"])
