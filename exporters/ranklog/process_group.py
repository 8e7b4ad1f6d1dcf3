"""Stopping a child that runs in its own session together with everything it started.

Used by the demo driver and by the tests' process helpers: SIGTERM (or another signal) to the whole
process group, SIGKILL after a grace period, and never an error for a group that is already gone.
"""

from __future__ import annotations

import os
import signal
import subprocess


def signal_group(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    """Send `sig` to `proc`'s process group if it still runs (`proc` was started with a new session)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass


def stop_group(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 10.0,
               kill_wait: float = 5.0) -> int | None:
    """`sig` to the group, SIGKILL if it has not exited after `timeout` s; the exit code."""
    if proc.poll() is None:
        signal_group(proc, sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            signal_group(proc, signal.SIGKILL)
            proc.wait(timeout=kill_wait)
    return proc.returncode
