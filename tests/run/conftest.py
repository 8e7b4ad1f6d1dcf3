"""Fixtures for `ranklog run` tests: start the wrapper as a real process and always stop it."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.helpers.log_files import child_env
from tests.helpers.procs import ranklog_cmd, stop


class Wrapped:
    """A running `ranklog run` with its console output on pipes."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc

    def wait_for_line(self, *texts: bytes, timeout: float = 30.0) -> bytes:
        """Read the wrapper's stdout until it has shown every one of `texts` (bounded by size and time)."""
        import selectors
        import time

        deadline = time.monotonic() + timeout
        seen = b""
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline and len(seen) < 1 << 20:
                if selector.select(timeout=0.2):
                    chunk = self.proc.stdout.read1(4096)
                    if not chunk:
                        break
                    seen += chunk
                    if all(text in seen for text in texts):
                        return seen
        raise AssertionError(f"{texts!r} not all printed within {timeout}s; got {seen[-500:]!r}")


@pytest.fixture
def wrapped(tmp_path: Path):
    """Start `ranklog run --log-dir tmp/logs [flags] -- python -c CODE`; returns a `Wrapped`."""
    started: list[subprocess.Popen] = []

    def start(code: str, *flags: str, env: dict[str, str] | None = None) -> Wrapped:
        script = tmp_path / f"child{len(started)}.py"
        script.write_text(textwrap.dedent(code))
        import sys

        argv = ranklog_cmd("run", "--log-dir", str(tmp_path / "logs"), *flags, "--", sys.executable, str(script))
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=child_env(**(env or {})), start_new_session=True)
        started.append(proc)
        return Wrapped(proc)

    yield start
    for proc in started:
        stop(proc, timeout=5)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
