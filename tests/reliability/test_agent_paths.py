"""The agent never blocks on a path (issue 40 items 3 and 11), with a real agent and archive.

1. FIFOs named like rotation copies (``app.log.1``, ``app.log.2``) beside a tracked ``app.log``,
   which is then truncated (copytruncate): the agent looks for the copy and for newer copies — it
   must not open a FIFO (a reader's ``open()`` blocks until a writer comes), must report each as
   ``not_a_file`` (log line + gauge), and must go on shipping ``app.log``'s new lines and another
   file's.
2. A dangling symlink matched by the glob (``latest.log`` → a deleted file): reported, not silent.
3. SIGTERM, then the tracked ``app.log`` replaced by a FIFO while the agent is down, then a start:
   the agent must come up (finding its files again must not open the FIFO), report it, ship the other
   file's new lines, and end on SIGTERM within its drain timeout.

Every wait is bounded; an agent that hangs is SIGKILLed by the helper.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pyarrow.compute as pc
import pytest

from tests.helpers.agent_proc import running_agent
from tests.helpers.archive_proc import read_archive, running_archive
from tests.reliability.report import Row

pytestmark = pytest.mark.slow
SHUTDOWN = 3.0


def _lines(path: Path, tag: str, start: int, count: int) -> None:
    with open(path, "a") as handle:
        for i in range(start, start + count):
            handle.write(f"2026-12-07 10:00:00,000 INFO {tag} line {i}\n")


def _shipped(root: Path, tag: str) -> int:
    table = read_archive(root)
    return int(pc.sum(pc.match_substring(table["msg"], f"{tag} line ")).as_py() or 0) if table.num_rows else 0


def _wait(root: Path, wanted: dict[str, int], timeout: float = 30.0) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    got = {tag: _shipped(root, tag) for tag in wanted}
    while any(got[tag] < n for tag, n in wanted.items()) and time.monotonic() < deadline:
        time.sleep(0.3)
        got = {tag: _shipped(root, tag) for tag in wanted}
    return got


def _stop_timed(agent) -> tuple[int | None, float]:
    """SIGTERM; (exit status, seconds to exit) — None if it had to be SIGKILLed after 20 s."""
    started = time.monotonic()
    agent.proc.send_signal(signal.SIGTERM)
    try:
        code = agent.proc.wait(20)
    except Exception:
        agent.kill()
        code = None
    return code, time.monotonic() - started


def test_fifos_and_dangling_symlinks_never_block_the_agent(tmp_path, token_file, record_row):
    logs = tmp_path / "logs"
    logs.mkdir()
    app, other = logs / "app.log", logs / "other.log"
    _lines(app, "app", 0, 50)
    _lines(other, "other", 0, 50)
    notes = {}
    with running_archive(tmp_path / "archive", token_file, extra_args=("--flush-interval", "200ms")) as archive:
        root = archive.root
        with running_agent([archive.url], token_file, tmp_path / "state", sources=[f"{logs}/*.log:text"],
                           extra_args=("--shutdown-timeout", f"{SHUTDOWN:g}s")) as agent:
            _wait(root, {"app": 50, "other": 50})
            os.mkfifo(logs / "app.log.1")
            os.mkfifo(logs / "app.log.2")
            os.symlink(logs / "deleted-yesterday.log", logs / "latest.log")
            time.sleep(0.3)
            with open(app, "r+") as handle:  # copytruncate without the copy: the agent looks for one
                handle.truncate(0)
            _lines(app, "app2", 0, 30)
            _lines(other, "other", 50, 30)
            got = _wait(root, {"app2": 30, "other": 80})
            try:
                scrape = agent.wait_for(lambda s: s.value("ranklog_agent_unreadable_paths", reason="not_a_file") >= 2
                                        and s.value("ranklog_agent_unreadable_paths", reason="dangling_symlink") >= 1,
                                        15, "FIFOs and the dangling symlink reported")
                gauge = {r: scrape.value("ranklog_agent_unreadable_paths", reason=r)
                         for r in ("not_a_file", "dangling_symlink")}
            except (TimeoutError, RuntimeError):
                gauge = None
            code, seconds = _stop_timed(agent)
            log = agent.log()
            notes["copy lookup"] = (f"app.log's new generation {got['app2']}/30 and other.log {got['other']}/80 "
                                    f"shipped; gauge {gauge}; SIGTERM → exit {code} in {seconds:.1f} s")
            reported = [name for name in ("app.log.1", "app.log.2", "latest.log")
                        if f"cannot read {logs / name}" in log]
            notes["reported"] = reported

            # 3. the tracked file replaced by a FIFO while the agent is down
            app.unlink()
            os.mkfifo(app)
            _lines(other, "other", 80, 20)
            agent.start()
            started = _wait(root, {"other": 100})
            try:
                agent.wait_for(lambda s: s.value("ranklog_agent_unreadable_paths", reason="not_a_file") >= 1, 15,
                               "the FIFO at app.log reported")
                restart_reported = f"cannot read {app} (not_a_file" in agent.log()
            except (TimeoutError, RuntimeError):
                restart_reported = False
            code2, seconds2 = _stop_timed(agent)
            notes["restart"] = (f"other.log {started['other']}/100 shipped after a start with app.log a FIFO; "
                                f"reported {restart_reported}; SIGTERM → exit {code2} in {seconds2:.1f} s")
    ok = (got == {"app2": 30, "other": 80} and gauge is not None and len(reported) == 3 and code == 0
          and seconds < SHUTDOWN + 5 and started["other"] == 100 and restart_reported and code2 == 0
          and seconds2 < SHUTDOWN + 5)
    record_row(Row(
        "agent: FIFOs and dangling symlinks", "FIFOs app.log.1/app.log.2 beside a tracked app.log, which is then "
        "truncated; a dangling latest.log symlink; then app.log replaced by a FIFO while the agent is down and the "
        "agent started again", "new lines of app.log and another file shipped; each path reported (log line + "
        "ranklog_agent_unreadable_paths); SIGTERM ends the agent within shutdown_timeout + 5 s",
        written=180, archived=got.get("app2", 0) + started.get("other", 0) + 50,
        lost=180 - got.get("app2", 0) - started.get("other", 0) - 50, notes=str(notes)))
    assert ok, notes
