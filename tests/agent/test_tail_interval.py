"""A file being written is read again `tail_interval` after a read reached its end, not once per write.

Python logging writes every record with a write of its own, so a rank logging steadily shows the
agent a new line at every read: each read then costs a parse, a metrics summary and an encoding
with set-up costs of ~2 ms, for one line. Real writer processes, a real agent and archive; the agent's
``ranklog_agent_reads_total`` counts the reads that got bytes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.agent.conftest import assert_exactly_once, finish, start_writer, wait_archived
from tests.agent.writer import line
from tests.helpers.agent_proc import running_agent
from tests.helpers.archive_proc import running_archive

FILES = 8
LINES = 300  # per file, at 100 lines/s: 3 s of writes of one line each


def _trickle(tmp_path: Path, token_file: Path, tail_interval: str) -> float:
    """Reads the agent made while eight writers wrote LINES lines each, one write a line; every line
    must be stored exactly once either way."""
    logs = tmp_path / "logs"
    logs.mkdir(parents=True)
    with running_archive(tmp_path / "archive", token_file) as archive:
        with running_agent([archive.url], token_file, tmp_path / "state", sources=[f"{logs}/*.jsonl"],
                           extra_args=["--tail-interval", tail_interval]) as agent:
            before = agent.wait_for(lambda s: s.value("ranklog_agent_files_tracked") == 0, what="agent up")
            writers = [start_writer(logs / f"rank{rank}.jsonl", "--lines", str(LINES), "--start", str(rank * LINES),
                                    "--rate", "100", log_dir=tmp_path) for rank in range(FILES)]
            for writer in writers:
                finish(writer)
            after = agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= FILES * LINES,
                                   timeout=30, what="every line shipped")
        assert_exactly_once(wait_archived(archive.root, FILES * LINES), set(range(FILES * LINES)))
    reads = after.value("ranklog_agent_reads_total") - before.value("ranklog_agent_reads_total")
    return reads


@pytest.mark.slow
def test_a_trickle_is_read_once_per_tail_interval_and_once_per_write_without_it(tmp_path: Path,
                                                                              token_file: Path) -> None:
    """3 s of writes: with the default 250 ms, ~12 reads a file (≤ 4 a second plus a file's first read);
    with 0 the agent reads a file whenever it has a new line — close to one read a write."""
    resting = _trickle(tmp_path / "default", token_file, "250ms")
    eager = _trickle(tmp_path / "eager", token_file, "0")
    assert resting <= FILES * (3 / 0.25 + 4), f"{resting} reads of {FILES} files in 3 s with a 250 ms tail_interval"
    assert eager >= FILES * LINES / 4, f"only {eager} reads of {FILES * LINES} single-line writes with tail_interval 0"


@pytest.mark.slow
def test_the_first_line_after_quiet_goes_at_once_and_a_backlog_is_read_through(tmp_path: Path, token_file: Path,
                                                                             archive) -> None:
    """A 30 s tail_interval: a new file's first line and a 20,000-line file renamed in ship at once
    (an empty read does not rest a file; full reads and a file not being written do not either);
    the line written right after a line was read waits for the interval."""
    logs = tmp_path / "logs"
    logs.mkdir()
    with running_agent([archive.url], token_file, tmp_path / "state", sources=[f"{logs}/*.jsonl"],
                       extra_args=["--tail-interval", "30s"]) as agent:
        agent.wait_for(lambda s: s.value("ranklog_agent_files_tracked") == 0, what="agent up")
        with open(logs / "live.jsonl", "ab", buffering=0) as live:
            live.write(line(0))
            agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 1, timeout=5,
                           what="a new file's first line", interval=0.05)
            live.write(line(1))
            staged = tmp_path / "staged.jsonl"
            staged.write_bytes(b"".join(line(i) for i in range(2, 20_002)))
            old = time.time() - 60
            os.utime(staged, (old, old))
            os.rename(staged, logs / "backlog.jsonl")
            agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 20_001, timeout=10,
                           what="the backlog shipped", interval=0.05)
            time.sleep(1.0)
            assert agent.scrape().value("ranklog_agent_records_shipped_total") == 20_001, \
                "the live file's second line was read before its tail_interval ran out"


def test_which_reads_rest_a_file(tmp_path: Path) -> None:
    """Only a short read that got bytes of a file written within the interval rests it, and never a
    file truncated under the agent before (a later copytruncate generation: its unread bytes would be
    lost at the next truncation when the copy is out of the agent's sight)."""
    from ranklog.agent.tracked_file import TrackedFile

    live, old = tmp_path / "live.jsonl", tmp_path / "old.jsonl"
    live.write_bytes(line(0))
    old.write_bytes(line(0))
    os.utime(old, (time.time() - 60, time.time() - 60))

    def rests(path: Path, nread: int, generation: int = 1, chunk: int = 1 << 20) -> bool:
        fd = os.open(path, os.O_RDONLY)
        try:
            tf = TrackedFile(str(path), fd, "ranklog", {}, {}, generation=generation)
            tf.rest_after(nread, chunk, now=100.0, interval=0.25)
            return tf.resting(100.1) and not tf.resting(100.25)
        finally:
            os.close(fd)

    assert rests(live, 100)
    assert not rests(live, 0)  # an empty read: the next bytes are read at once
    assert not rests(live, 1 << 20)  # a full read: a backlog is read straight through
    assert not rests(old, 100)  # not being written (renamed in, found at start)
    assert not rests(live, 100, generation=2)  # rotated by copytruncate before
