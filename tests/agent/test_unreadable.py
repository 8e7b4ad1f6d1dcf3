"""Nothing on a node is skipped silently: what the agent cannot read is a log line and a metric by reason.

Real permissions, not mocks: the agent runs as an unprivileged throwaway uid (``setpriv``; the test
itself runs as root, which no mode bit stops) over files and directories owned by root — a 0700
torchrun-style run directory, a mode-000 file, a umask-077 file — plus a FIFO matched by a glob and
a plain-path source that does not exist. Each shows up once in the agent's log, and in
``ranklog_agent_unreadable_paths{reason}`` (no path label). When the files are made readable (what
``CAP_DAC_READ_SEARCH`` or a group/ACL does for a real deployment), every line is shipped and the
gauge goes back to zero.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent.conftest import wait_archived
from tests.helpers.agent_proc import running_agent

AGENT_UID = 61616  # no passwd entry needed: setpriv switches to the bare uid/gid
LINES = 20

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                reason="needs root (to own files the agent's uid cannot read) and setpriv")


def _write(path: Path, tag: str, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"2026-12-04 10:00:{i:02d} ERROR {tag} line {i}\n" for i in range(LINES)))
    path.chmod(mode)


@pytest.fixture
def node() -> Iterator[Path]:
    """A directory tree every uid can traverse (pytest's tmp_path is root-only 0700)."""
    base = Path(tempfile.mkdtemp(prefix="ranklog-unreadable-", dir="/tmp"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_unreadable_paths_are_logged_counted_and_read_once_readable(node: Path, archive) -> None:
    logs = node / "logs"
    _write(logs / "ok.log", "ok", 0o644)
    _write(logs / "secret.log", "secret", 0o000)
    _write(logs / "umask077.log", "umask", 0o600)  # what a training user's umask 077 leaves
    run_dir = logs / "torchrun" / "run_abc"  # tempfile.mkdtemp: 0700, owned by the training user
    _write(run_dir / "attempt_0" / "0" / "stdout.log", "rank0", 0o644)
    run_dir.chmod(0o700)
    os.mkfifo(logs / "pipe.log")
    state = node / "state"
    state.mkdir()
    os.chown(state, AGENT_UID, AGENT_UID)
    token = node / "token"
    token.write_text(archive.token_file.read_text())
    token.chmod(0o644)
    missing = logs / "expected.log"

    setpriv = ["setpriv", f"--reuid={AGENT_UID}", f"--regid={AGENT_UID}", "--clear-groups"]
    with running_agent([archive.url], token, state, sources=[f"{logs}/*.log:text", f"{logs}/**/*.log:text",
                                                             f"{missing}:text"], prefix=setpriv) as agent:
        expected = {"permission": 3, "not_a_file": 1, "missing": 1, "error": 0}
        scrape = agent.wait_for(lambda s: all(s.value("ranklog_agent_unreadable_paths", reason=r) == n
                                              for r, n in expected.items()), 30, f"unreadable paths {expected}")
        assert all(set(labels) == {"reason"} for labels in scrape.labels("ranklog_agent_unreadable_paths"))
        wait_archived(archive.root, LINES)  # ok.log only
        agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") == LINES, 10, "ok.log shipped")

        log = agent.log()
        for path, reason in ((logs / "secret.log", "permission"), (logs / "umask077.log", "permission"),
                             (run_dir, "permission"), (logs / "pipe.log", "not_a_file"), (missing, "missing")):
            lines = [line for line in log.splitlines() if f"cannot read {path} ({reason}" in line]
            assert len(lines) == 1, f"{path}: expected one {reason} warning (many scans later), got {lines}"
            assert "WARNING" in lines[0] and f"agent uid {AGENT_UID}" in lines[0]

        # Made readable, as CAP_DAC_READ_SEARCH / a group / an ACL would: picked up, nothing lost.
        (logs / "secret.log").chmod(0o644)
        (logs / "umask077.log").chmod(0o644)
        run_dir.chmod(0o755)
        (logs / "pipe.log").unlink()
        table = wait_archived(archive.root, 4 * LINES)
        agent.wait_for(lambda s: s.value("ranklog_agent_unreadable_paths", reason="permission") == 0
                       and s.value("ranklog_agent_unreadable_paths", reason="not_a_file") == 0, 10, "gauge cleared")
    messages = table.column("msg").to_pylist()
    for tag in ("ok", "secret", "umask", "rank0"):
        got = sorted(int(m.rsplit(" ", 1)[1]) for m in messages if f"{tag} line " in m)
        assert got == list(range(LINES)), f"{tag}: lines {got}"
