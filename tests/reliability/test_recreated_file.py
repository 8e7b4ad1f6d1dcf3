"""A recreated file cannot fool the agent's file identity (issue 40 item 6).

``app.log`` is first seen holding one line (so its identity's head covers only that line), grows to
100 lines, all shipped; the agent stops. While it is down the file is replaced by one that starts with
the same line and goes on with 400 new ones — (a) rewritten in place (same inode, same birth time),
(b) deleted and created again (the test retries until the filesystem hands out the same inode). When
the agent starts, every new line must be archived (none skipped by resuming at the old offset), the
old ones once, the replacement counted in ``ranklog_agent_recreated_files_total`` and logged.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow.compute as pc
import pytest

from tests.helpers.agent_proc import running_agent
from tests.helpers.archive_proc import read_archive, running_archive
from tests.reliability.report import Row

pytestmark = pytest.mark.slow
FIRST = "2026-12-07 10:00:00,000 INFO the first line of the run\n"


def _line(tag: str, i: int) -> str:
    return f"2026-12-07 10:00:01,000 INFO {tag} line {i}\n"


def _count(root: Path, tag: str) -> int:
    table = read_archive(root)
    return int(pc.sum(pc.match_substring(table["msg"], f"{tag} line ")).as_py() or 0) if table.num_rows else 0


def _wait(root: Path, tag: str, n: int, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while _count(root, tag) < n and time.monotonic() < deadline:
        time.sleep(0.3)
    return _count(root, tag)


def _recreate(path: Path, content: str, same_inode: bool) -> bool:
    """Replace the file by `content`: in place, or deleted and created again (with the same inode when
    the filesystem hands it out within 200 tries). True when the inode is the old one."""
    inode = path.stat().st_ino
    if same_inode:
        path.write_text(content)  # O_TRUNC: the same inode and birth time
        return True
    path.unlink()
    spares = []
    for attempt in range(200):
        candidate = path if attempt == 0 else path.with_name(f".spare{attempt}")
        candidate.write_text(content)
        if candidate.stat().st_ino == inode:
            if candidate != path:
                os.rename(candidate, path)
            break
        spares.append(candidate)
    else:
        spares.pop(0)
    for spare in spares:
        if spare != path:
            spare.unlink()
    if not path.exists():
        path.write_text(content)
    return path.stat().st_ino == inode


@pytest.mark.parametrize("how", ["rewritten in place", "deleted and recreated"])
def test_a_recreated_file_is_read_from_its_start(tmp_path, token_file, record_row, how):
    logs = tmp_path / "logs"
    logs.mkdir()
    app = logs / "app.log"
    app.write_text(FIRST)
    with running_archive(tmp_path / "archive", token_file, extra_args=("--flush-interval", "200ms")) as archive:
        with running_agent([archive.url], token_file, tmp_path / "state", sources=[f"{logs}/*.log:text"]) as agent:
            agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 1, 30, "the first line")
            with open(app, "a") as handle:
                handle.write("".join(_line("old", i) for i in range(99)))
            old = _wait(archive.root, "old", 99)
            agent.wait_idle()
            agent.stop()
            offset = app.stat().st_size
            reused = _recreate(app, FIRST + "".join(_line("new", i) for i in range(399)), how == "rewritten in place")
            agent.start()
            new = _wait(archive.root, "new", 399)
            time.sleep(1.0)
            scrape = agent.scrape()
            recreated = scrape.value("ranklog_agent_recreated_files_total")
            logged = "deleted and recreated while the agent was down" in agent.log()
        table = read_archive(archive.root)
        keys = list(zip(table["source_id"].to_pylist(), table["offset"].to_pylist(), strict=True))
    lost = 399 - new
    record_row(Row(
        f"recreated file: {how}", f"app.log first seen with one line, grown to 100 lines, all shipped; agent stopped; "
        f"the file {how} with the same first line and 399 new lines (same inode: {reused}); agent started",
        "every new line archived (not skipped by resuming at the old offset), the old ones once; "
        "ranklog_agent_recreated_files_total and a log line",
        written=100 + 399, archived=old + 1 + new, lost=lost, duplicated=len(keys) - len(set(keys)),
        notes=f"old offset {offset}; new lines archived {new}/399; recreated counted {recreated:.0f}, logged {logged}"))
    assert old == 99 and new == 399 and len(keys) == len(set(keys))
    if reused:
        assert recreated == 1 and logged
