"""Start `ranklog` subcommands as real processes and always tear them down by pid."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from ranklog.process_group import stop_group

REPO = Path(__file__).resolve().parents[2]


def ranklog_cmd(*args: str) -> list[str]:
    """The argv that runs `ranklog ARGS…` with this interpreter (works without the venv on PATH)."""
    return [sys.executable, "-m", "ranklog", *args]


def spawn(args: list[str], log_path: Path | None = None, env: dict[str, str] | None = None,
          **kwargs) -> subprocess.Popen:
    """Start a process in its own session (so a kill reaches its children); output to `log_path`."""
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 - closed by stop()
    proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, **(env or {})}, **kwargs)
    proc._ranklog_log = out  # type: ignore[attr-defined]
    return proc


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int | None:
    """Stop `proc` and its process group: `sig` first, SIGKILL after `timeout`. Returns the exit code."""
    stop_group(proc, sig, timeout=timeout, kill_wait=timeout)
    log = getattr(proc, "_ranklog_log", None)
    if log not in (None, subprocess.DEVNULL):
        log.close()
    return proc.returncode


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` (all its threads), from /proc: load-insensitive cost."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
