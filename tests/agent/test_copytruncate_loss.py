"""copytruncate without silent loss: the unread tail comes from the copy; what no copy holds is reported.

Real agent, real archive, real files. The archive is stopped so the agent's read budget
(``--max-unacked-bytes``) pauses reading while its polls keep seeing the file grow — the situation in
which a copytruncate overtakes an agent on a busy node:

1. the copy sits beside the file (logrotate's ``app.log.1``): the old generation's unread tail is
   read from the copy under its source_id — every line arrives exactly once, nothing is lost;
2. the copy is moved away before the truncate (``olddir`` on another disk, a compress that ran):
   what the agent saw but had not read is counted in ``ranklog_agent_lost_bytes_total{reason=
   "truncated"}``, logged, shipped as a WARNING record of that source, and ``ranklog integrity``
   fails naming the source and the bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.agent.conftest import wait_archived
from tests.agent.writer import line
from tests.helpers.agent_proc import running_agent
from tests.helpers.procs import ranklog_cmd

pytestmark = pytest.mark.slow

BUDGET = ["--max-unacked-bytes", "20KB", "--batch-bytes", "8KB", "--read-chunk", "8KB"]


def _append(path: Path, seqs: range) -> int:
    data = b"".join(line(seq) for seq in seqs)
    with path.open("ab") as handle:
        handle.write(data)
    return len(data)


def test_copytruncate_reads_the_copy_then_reports_what_no_copy_holds(tmp_path: Path, token_file: Path,
                                                                       archive) -> None:
    logs, elsewhere = tmp_path / "logs", tmp_path / "olddir"
    logs.mkdir()
    elsewhere.mkdir()
    path = logs / "app.log"
    path.write_bytes(b"")
    with running_agent([archive.url], token_file, tmp_path / "state", sources=[f"{path}:ranklog"],
                       extra_args=BUDGET) as agent:
        # 1. the copy beside the file holds the tail the agent has not read
        archive.stop()
        size = _append(path, range(0, 3000))
        agent.wait_for(lambda s: s.value("ranklog_agent_reading_paused") == 1
                       and s.value("ranklog_agent_backlog_bytes") >= size, 30, "reading paused, growth seen")
        assert agent.scrape().value("ranklog_agent_bytes_read_total") < size / 2
        shutil.copyfile(path, logs / "app.log.1")
        os.truncate(path, 0)
        _append(path, range(3000, 3100))
        archive.start()
        agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 3100, 60, "all 3100 shipped")
        assert agent.scrape().value("ranklog_agent_lost_bytes_total") == 0

        # 2. the copy went elsewhere: what the agent saw and could not read is lost, and said so
        archive.stop()
        seen = _append(path, range(3100, 6100))
        agent.wait_for(lambda s: s.value("ranklog_agent_reading_paused") == 1
                       and s.value("ranklog_agent_backlog_bytes") >= seen, 30, "reading paused again")
        shutil.copyfile(path, elsewhere / "app.log.1")
        os.truncate(path, 0)
        _append(path, range(6100, 6200))
        archive.start()
        scrape = agent.wait_idle(timeout=60)
        lost = scrape.value("ranklog_agent_lost_bytes_total", reason="truncated")
        log = agent.log()
    table = wait_archived(tmp_path / "archive", 1, columns=("source_id", "offset", "msg", "seq", "attrs", "level"))
    rows = table.to_pylist()
    seqs = [row["seq"] for row in rows if row["seq"] is not None]
    assert len(seqs) == len(set(seqs)), "a line was shipped twice"
    assert set(range(0, 3100)) <= set(seqs), "phase 1: the copy's tail must arrive"
    missing = set(range(3100, 6200)) - set(seqs)
    assert missing and set(range(6100, 6200)) <= set(seqs)
    # the missing lines' bytes: the agent saw all of them (its polls ran while reading paused); the
    # head of the first one was read (and kept as a text record), so it counts only its unread rest
    partial = sum(len(line(seq)) for seq in missing) - lost
    assert 0 <= partial < len(line(min(missing)))
    assert f"{lost:.0f} bytes of {path} were truncated before they were shipped" in log
    (notice,) = [row for row in rows if row["attrs"] and "ranklog_lost_bytes" in row["attrs"]]
    assert notice["level"] == "WARNING" and json.loads(notice["attrs"]) == {
        "ranklog_lost_bytes": int(lost), "ranklog_lost_reason": "truncated"}

    check = subprocess.run(ranklog_cmd("integrity", "--archive", str(tmp_path / "archive"), "--json"),
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 1, check.stderr
    report = json.loads(check.stdout)
    assert report["agent_lost_bytes"] == lost
    # the seq walk follows the file's generations (same path, offsets from 0 again): one gap, no restart
    assert (report["missing_records"], report["restarts"]) == (len(missing), 0)
    assert [(e["source"], e["reason"]) for e in report["agent_losses"]] == [(str(path), "truncated")]
    human = subprocess.run(ranklog_cmd("integrity", "--archive", str(tmp_path / "archive")),
                           capture_output=True, text=True, timeout=120)
    assert human.returncode == 1 and f"{lost:.0f} byte(s) lost on nodes" in human.stdout
