"""The agent and its parse workers run without transparent huge pages (:mod:`ranklog.agent.huge_pages`)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.agent.scripted_archive import scripted_archive
from tests.helpers.agent_proc import parse_worker_pids, running_agent


def _thp_enabled(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("THP_enabled:"):
            return line.split()[1]
    pytest.skip("this kernel does not report THP_enabled in /proc/<pid>/status (Linux < 5.0)")


def test_the_agent_and_its_parse_workers_run_without_transparent_huge_pages(tmp_path: Path, token_file: Path) -> None:
    assert _thp_enabled(os.getpid()) == "1", "the test runner keeps THP: what the agent shows is its own doing"
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a.jsonl").write_text('{"ts":"2026-12-02T12:00:00Z","level":"INFO","msg":"hello"}\n')
    with scripted_archive() as archive, running_agent(
            [archive.url], token_file, tmp_path / "state", sources=[f"{tmp_path}/logs/*.jsonl:ranklog"],
            extra_args=["--parse-workers", "2"]) as agent:
        agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 1, what="the record shipped")
        deadline = time.monotonic() + 30
        while len(workers := parse_worker_pids(agent.proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(workers) == 2
        assert [_thp_enabled(pid) for pid in (agent.proc.pid, *workers)] == ["0", "0", "0"]
        assert "transparent huge pages" not in agent.log()  # nothing to report: the opt-out worked
