"""A stuck system call in one source cannot stall the others (issue 40 item 3), on a real FUSE mount.

``tests/helpers/stuck_fs.py`` mounts a filesystem whose reads of ``stuck.log`` hang until released —
what a dead NFS server does to a reader. The agent tails it and a local ``ok.log`` that keeps growing.
The local lines must keep arriving while the read hangs; after ``stall_timeout`` the file is reported
(log line, ``ranklog_agent_unreadable_paths{reason="stuck"}``); once the mount answers again its lines
arrive and the gauge clears. With the read hanging again, SIGTERM ends the agent within its drain
timeout. Needs root and /dev/fuse (libfuse2 + fusepy, both installed by ``make test``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.compute as pc
import pytest

from tests.helpers.agent_proc import running_agent
from tests.helpers.archive_proc import known_flags, read_archive, running_archive
from tests.helpers.procs import REPO, spawn, stop
from tests.reliability.report import Row

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists("/dev/fuse") or shutil.which("umount") is None,
    reason="needs root, /dev/fuse and umount to mount a FUSE filesystem")]
STALL, SHUTDOWN = 2.0, 3.0


def _count(root: Path, tag: str) -> int:
    table = read_archive(root)
    return int(pc.sum(pc.match_substring(table["msg"], f"{tag} line ")).as_py() or 0) if table.num_rows else 0


def _mounted(mountpoint: Path, proc, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if any(f" {mountpoint} " in line for line in Path("/proc/self/mountinfo").read_text().splitlines()):
            return True
        time.sleep(0.1)
    return False


def test_a_hung_mount_stalls_only_its_own_file(tmp_path, token_file, record_row):
    pytest.importorskip("fuse", reason="fusepy (and Debian's libfuse2) make the FUSE mount")
    mountpoint, release, local = tmp_path / "mnt", tmp_path / "release", tmp_path / "local"
    mountpoint.mkdir()
    local.mkdir()
    fs = spawn([sys.executable, "-m", "tests.helpers.stuck_fs", str(mountpoint), str(release)],
               log_path=tmp_path / "stuck_fs.log", cwd=str(REPO))
    notes: dict[str, object] = {}
    try:
        if not _mounted(mountpoint, fs):
            pytest.skip(f"the FUSE mount did not come up: {(tmp_path / 'stuck_fs.log').read_text()[-300:]}")
        ok = local / "ok.log"
        with running_archive(tmp_path / "archive", token_file, extra_args=("--flush-interval", "200ms")) as archive, \
                running_agent([archive.url], token_file, tmp_path / "state",
                              sources=[f"{mountpoint}/*.log:text", f"{local}/*.log:text"],
                              extra_args=("--shutdown-timeout", f"{SHUTDOWN:g}s",
                                          *known_flags("--stall-timeout", f"{STALL:g}s", command="agent"))) as agent:
            written = 0
            started = time.monotonic()
            while time.monotonic() - started < 6:  # ok.log grows while stuck.log's read hangs
                with open(ok, "a") as handle:
                    handle.write("".join(f"2026-12-07 10:00:00,000 INFO ok line {written + i}\n" for i in range(10)))
                written += 10
                time.sleep(0.2)
            deadline = time.monotonic() + 20
            while _count(archive.root, "ok") < written and time.monotonic() < deadline:
                time.sleep(0.2)
            notes["ok.log while stuck"] = f"{_count(archive.root, 'ok')}/{written}"
            try:
                scrape = agent.wait_for(lambda s: s.value("ranklog_agent_unreadable_paths", reason="stuck") == 1, 30,
                                        "stuck.log reported stuck")
                notes["gauge stuck"] = scrape.value("ranklog_agent_unreadable_paths", reason="stuck")
            except (TimeoutError, RuntimeError):
                notes["gauge stuck"] = None
            notes["logged"] = "stuck.log has not returned" in agent.log() or "has not returned for" in agent.log()
            release.touch()  # the server answers again
            deadline = time.monotonic() + 20
            while _count(archive.root, "stuck") < 100 and time.monotonic() < deadline:
                time.sleep(0.2)
            notes["stuck.log after release"] = f"{_count(archive.root, 'stuck')}/100"
            try:
                agent.wait_for(lambda s: s.value("ranklog_agent_unreadable_paths", reason="stuck") == 0, 30,
                               "the stuck gauge cleared")
                notes["gauge cleared"] = True
            except (TimeoutError, RuntimeError):
                notes["gauge cleared"] = False
            # hung again, then SIGTERM: the agent ends within its drain timeout
            release.unlink()
            agent.stop()
            agent.start()
            time.sleep(STALL + 1)
            sent = time.monotonic()
            agent.proc.send_signal(signal.SIGTERM)
            try:
                code = agent.proc.wait(SHUTDOWN + 15)
            except subprocess.TimeoutExpired:
                code = None
            notes["SIGTERM while a read hangs"] = f"exit {code} in {time.monotonic() - sent:.1f} s"
            sigterm_seconds = time.monotonic() - sent
    finally:
        release.touch()
        subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True)
        stop(fs, signal.SIGTERM, timeout=5)
    record_row(Row(
        "agent: a hung FUSE mount", "the agent tails a FUSE file whose reads hang (a dead NFS server) and a local "
        f"file growing 50 lines/s (stall_timeout {STALL:g} s); the mount answers again; then hangs again and the "
        "agent gets SIGTERM", "local lines shipped while the read hangs; the file reported stuck (log line + "
        "ranklog_agent_unreadable_paths{reason=stuck}) and cleared; its lines shipped once it answers; SIGTERM "
        f"ends the agent within shutdown_timeout ({SHUTDOWN:g} s) + 5 s",
        written=written + 100, archived=_count(archive.root, "ok") + _count(archive.root, "stuck"), notes=str(notes)))
    assert notes["ok.log while stuck"] == f"{written}/{written}" and notes["gauge stuck"] == 1 and notes["logged"]
    assert notes["stuck.log after release"] == "100/100" and notes["gauge cleared"]
    assert code == 0 and sigterm_seconds < SHUTDOWN + 5
