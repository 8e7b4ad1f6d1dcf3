"""Operable by hand: JSON service logs (flag and environment), process_* and build-info metrics.

A real agent and a real archive: the agent with ``--log-format json``, the archive configured only
through ``RANKLOG_ARCHIVE_LOG_FORMAT=json`` (the documented environment scheme). Every line each
writes on stderr is one JSON record; both /metrics pages carry the process collector's series and
``ranklog_build_info``.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from ranklog import __version__
from tests.helpers.agent_proc import Scrape, running_agent
from tests.helpers.archive_proc import running_archive

PROCESS_SERIES = ("process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
                  "process_start_time_seconds")


def _json_lines(text: str) -> list[dict]:
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines, "no log lines"
    return [json.loads(line) for line in lines]  # raises on any line that is not JSON


def _check_metrics(scrape: Scrape, component: str) -> None:
    for name in PROCESS_SERIES:
        assert scrape.value(name) > 0, name
    (info,) = scrape.labels("ranklog_build_info")
    assert info["component"] == component and info["version"] == __version__ and info["python"].count(".") == 2


def test_json_logs_process_and_build_info_metrics(tmp_path: Path, token_file: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.log").write_text("hello\n")
    with running_archive(tmp_path / "archive", token_file, env={"RANKLOG_ARCHIVE_LOG_FORMAT": "json"}) as archive, \
            running_agent([archive.url], token_file, tmp_path / "state", sources=[f"{logs}/*.log:text"],
                          extra_args=["--log-format", "json"]) as agent:
        agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 1, 60, "a record shipped")
        _check_metrics(agent.scrape(), "agent")
        _check_metrics(Scrape(httpx.get(f"{archive.url}/metrics", timeout=10).text), "archive")
        agent_log, archive_log = agent.log(), archive.log_text()
    records = _json_lines(agent_log)
    assert any(r["logger"] == "ranklog.agent" and r["msg"].startswith("agent started") for r in records)
    assert all({"ts", "level", "logger", "msg", "pid"} <= set(r) for r in records)
    assert all(r["level"] in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL") for r in _json_lines(archive_log))
