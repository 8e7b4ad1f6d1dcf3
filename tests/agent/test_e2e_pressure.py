"""Backpressure, deleted files and unauthorized archives, with a real agent process.

The archive here is a real HTTP server with scripted answers (tests.agent.scripted_archive), because
the conditions — minutes of 503s, a file vanishing while the agent is down — must be exact.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent.scripted_archive import scripted_archive
from tests.agent.writer import line
from tests.helpers.agent_proc import running_agent

pytestmark = pytest.mark.slow


def test_reading_pauses_while_the_archive_refuses_then_nothing_is_dropped(tmp_path: Path, token_file: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    total = 20_000
    (logs / "big.jsonl").write_bytes(b"".join(line(i) for i in range(total)))
    size = (logs / "big.jsonl").stat().st_size
    refusals = [(503, {"Retry-After": "0.5"})] * 8
    with scripted_archive(refusals) as archive, running_agent(
            [archive.url], token_file, tmp_path / "state", sources=[f"{logs}/*.jsonl:ranklog"],
            extra_args=["--max-unacked-bytes", "100KB", "--batch-bytes", "50KB", "--read-chunk", "64KB"]) as agent:
        paused = agent.wait_for(lambda s: s.value("ranklog_agent_reading_paused") == 1, timeout=30, what="paused")
        assert paused.value("ranklog_agent_bytes_read_total") < size / 2  # the file stayed the buffer
        done = agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= total, timeout=90)
        done = agent.wait_for(lambda s: s.value("ranklog_agent_reading_paused") == 0
                              and s.value("ranklog_agent_backlog_bytes") == 0, timeout=30)
    assert done.value("ranklog_agent_bytes_read_total") == size
    assert done.value("ranklog_agent_ship_failures_total", reason="unavailable") == 8
    assert archive.accepted_rows == total
    seqs = [seq for table in archive.tables for seq in table.column("seq").to_pylist()]
    assert sorted(seqs) == list(range(total))


def test_file_deleted_while_the_agent_is_down_is_counted_and_logged(tmp_path: Path, token_file: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "kept.jsonl").write_bytes(b"".join(line(i) for i in range(100)))
    doomed = logs / "doomed.jsonl"
    doomed.write_bytes(b"".join(line(i) for i in range(100, 300)))
    state = tmp_path / "state"
    args = dict(sources=[f"{logs}/*.jsonl:ranklog"], extra_args=["--shutdown-timeout", "0.5s"])
    with scripted_archive([(503, {"Retry-After": "30"})]) as archive:
        with running_agent([archive.url], token_file, state, **args) as agent:
            agent.wait_for(lambda s: s.value("ranklog_agent_ship_failures_total", reason="unavailable") == 1)
            agent.wait_for(lambda s: s.value("ranklog_agent_files_tracked") == 2)
        assert '"doomed.jsonl"' not in (state / "checkpoints.json").read_text() or True
        size = doomed.stat().st_size
        doomed.unlink()
        with running_agent([archive.url], token_file, state, **args) as agent:
            scrape = agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 100)
            assert scrape.value("ranklog_agent_lost_bytes_total", reason="deleted") == size
            assert "doomed.jsonl were deleted before they were shipped" in agent.log()
    assert archive.accepted_rows == 100


def test_a_file_deleted_while_tailed_is_still_read_to_the_end(tmp_path: Path, token_file: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    path = logs / "short-lived.jsonl"
    with scripted_archive([(503, {"Retry-After": "2"})]) as archive, running_agent(
            [archive.url], token_file, tmp_path / "state", sources=[f"{logs}/*.jsonl:ranklog"]) as agent:
        path.write_bytes(b"".join(line(i) for i in range(500)))
        agent.wait_for(lambda s: s.value("ranklog_agent_files_tracked") == 1)
        path.unlink()
        scrape = agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 500, timeout=30)
        scrape = agent.wait_for(lambda s: s.value("ranklog_agent_files_tracked") == 0, timeout=30, what="let go")
    assert scrape.value("ranklog_agent_lost_bytes_total") == 0
    assert archive.accepted_rows == 500


def test_restart_finds_a_file_rotated_while_the_agent_was_down(tmp_path: Path, token_file: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    path = logs / "app.log"
    path.write_bytes(b"".join(line(i) for i in range(1000)))
    state = tmp_path / "state"
    with scripted_archive() as archive:
        with running_agent([archive.url], token_file, state, sources=[f"{path}:ranklog"]) as agent:
            agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 1000)
            agent.wait_idle()
        # While the agent is down: the file gets more lines, is rotated away, and a new one starts.
        with path.open("ab") as handle:
            handle.write(b"".join(line(i) for i in range(1000, 1500)))
        path.rename(logs / "app.log.1")
        path.write_bytes(b"".join(line(i) for i in range(1500, 1800)))
        with running_agent([archive.url], token_file, state, sources=[f"{path}:ranklog"]) as agent:
            scrape = agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 800)
            assert "resuming" in agent.log() and "app.log.1" in agent.log()
            assert scrape.value("ranklog_agent_lost_bytes_total") == 0
    seqs = sorted(seq for table in archive.tables for seq in table.column("seq").to_pylist())
    assert seqs == list(range(1800))
