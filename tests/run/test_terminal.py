"""`ranklog run` on a terminal: Ctrl-C reaches the child once, and the wrapper outlives it."""

from __future__ import annotations

import os
import pty
import select
import signal
import sys
import time

from tests.helpers.log_files import all_records, child_env
from tests.helpers.procs import ranklog_cmd


def _read_until(fd: int, needle: bytes, timeout: float = 30.0) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while needle not in seen and time.monotonic() < deadline and len(seen) < 1 << 20:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    assert needle in seen, f"{needle!r} not seen; got {seen[-400:]!r}"
    return seen


def test_ctrl_c_on_a_terminal_goes_to_the_child_once(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(
        "import signal, sys, time\n"
        "got = []\n"
        "signal.signal(signal.SIGINT, lambda s, f: got.append(s))\n"
        "print('ready', flush=True)\n"
        "deadline = time.monotonic() + 30\n"
        "while not got and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        "time.sleep(0.5)\n"
        "print(f'child got {len(got)} INT', flush=True)\n"
        "sys.exit(7)\n")
    argv = ranklog_cmd("run", "--log-dir", str(tmp_path / "logs"), "--", sys.executable, str(script))
    env = child_env()
    pid, master = pty.fork()
    if pid == 0:  # the wrapper, on the pty as its controlling terminal and in the foreground
        try:
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    try:
        _read_until(master, b"ready")
        os.write(master, b"\x03")  # Ctrl-C: the terminal signals the foreground process group
        _read_until(master, b"child got 1 INT")
        deadline = time.monotonic() + 30
        status = None
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            try:
                os.read(master, 4096) if select.select([master], [], [], 0.1)[0] else None
            except OSError:
                pass
        assert status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 7
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(master)
    assert "child got 1 INT" in {r["msg"] for r in all_records(tmp_path / "logs")}
