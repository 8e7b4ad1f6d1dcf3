"""Discovery scans when a watched directory changes (inotify), not only every poll_interval.

Every test uses a poll interval far longer than its deadline, so only the change notice can explain
a file found in time; the last ones check the poll is still the safety net where no notice comes.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from ranklog.agent import inotify
from ranklog.agent.agent_config import SourceSpec
from ranklog.agent.discover import Discovery, DiscoveryThread
from tests.agent.writer import line
from tests.helpers.agent_proc import running_agent

LONG_POLL = 30.0


def _thread(glob: str, interval: float = LONG_POLL, **kwargs) -> tuple[DiscoveryThread, list[float]]:
    changes: list[float] = []
    thread = DiscoveryThread(Discovery([SourceSpec(glob, "auto")]), interval,
                             on_change=lambda: changes.append(time.monotonic()), **kwargs)
    thread.scan_once()
    thread.start()
    return thread, changes


def _found(thread: DiscoveryThread, path: Path, timeout: float) -> float | None:
    """Seconds until discovery opened `path`, or None."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        for item in thread.take():
            os.close(item.fd)
            if item.path == str(path):
                return time.monotonic() - started
        time.sleep(0.005)
    return None


def test_a_renamed_in_file_is_found_at_once(tmp_path: Path) -> None:
    watch = tmp_path / "logs"
    watch.mkdir()
    thread, changes = _thread(f"{watch}/*.log")
    try:
        staged = tmp_path / "staged.log"
        staged.write_text("hello\n")
        os.rename(staged, watch / "run.log")
        assert _found(thread, watch / "run.log", timeout=5) is not None
        assert changes  # the main loop is told to look now
    finally:
        thread.stop()


def test_new_subdirectories_and_missing_roots_are_followed(tmp_path: Path) -> None:
    """torchrun creates <log_dir>/<run_id>/attempt_0/<rank>/ at start; Ray creates /tmp/ray itself."""
    root = tmp_path / "torchrun"
    thread, _ = _thread(f"{root}/**/*.log")
    try:
        assert str(tmp_path) in thread.watching  # the root's nearest existing ancestor
        rank_dir = root / "run-1" / "attempt_0" / "3"
        rank_dir.mkdir(parents=True)
        (rank_dir / "stderr.log").write_text("Traceback (most recent call last):\n")
        assert _found(thread, rank_dir / "stderr.log", timeout=5) is not None
        assert str(rank_dir) in thread.watching
        (rank_dir / "stdout.log").write_text("step 1\n")  # a second file in the now-watched directory
        assert _found(thread, rank_dir / "stdout.log", timeout=5) is not None
    finally:
        thread.stop()


def test_the_poll_still_finds_what_no_notice_announces(tmp_path: Path) -> None:
    """Without inotify (network filesystems, other systems) discovery polls as before."""
    watch = tmp_path / "logs"
    watch.mkdir()
    thread, _ = _thread(f"{watch}/*.log", interval=0.3, watch=False)
    try:
        assert thread.watching == set()
        (watch / "a.log").write_text("x\n")
        assert _found(thread, watch / "a.log", timeout=5) is not None
    finally:
        thread.stop()


def test_past_the_watch_limit_directories_are_polled_with_one_warning(tmp_path: Path, monkeypatch, caplog) -> None:
    monkeypatch.setattr(inotify, "MAX_WATCHES", 2)
    for name in "abcd":
        (tmp_path / name).mkdir()
    thread, _ = _thread(f"{tmp_path}/*/*.log", interval=0.5)
    try:
        caplog.set_level(logging.WARNING, "ranklog.agent.discover")
        assert len(thread.watching) == 2
        (tmp_path / "d" / "late.log").write_text("x\n")  # "d" sorts after the two watched directories
        assert _found(thread, tmp_path / "d" / "late.log", timeout=5) is not None
    finally:
        thread.stop()
    assert "scanned every poll_interval instead of on change" in caplog.text


@pytest.mark.slow
def test_a_burst_in_a_new_file_ships_without_waiting_for_poll_or_batch_latency(tmp_path: Path, token_file: Path,
                                                                              archive) -> None:
    """Poll interval and batch latency of 30 s: a 20,000-line file renamed in is stored within seconds —
    found through its directory's change notice, and the burst's last partial request sent when the
    reader caught up instead of 30 s later."""
    logs = tmp_path / "logs"
    logs.mkdir()
    with running_agent([archive.url], token_file, tmp_path / "state", sources=[f"{logs}/*.jsonl"],
                       extra_args=["--poll-interval", "30s", "--batch-latency", "30s", "--batch-bytes", "1MB"]) as agent:
        agent.wait_for(lambda s: s.value("ranklog_agent_files_tracked") == 0, what="agent up")
        staged = tmp_path / "staged.jsonl"
        staged.write_bytes(b"".join(line(i) for i in range(20_000)))
        started = time.monotonic()
        os.rename(staged, logs / "burst.jsonl")
        agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 20_000, timeout=25,
                       what="the burst shipped", interval=0.05)
        assert time.monotonic() - started < 10
