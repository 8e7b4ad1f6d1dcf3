"""Flush on SIGTERM: launchers (torchrun, SLURM, Kubernetes) stop ranks with SIGTERM.

Python's default SIGTERM action kills the process on the spot, without ``atexit``, so records
still in the queue would be lost exactly when they matter most (the last words of a rank being
stopped because another failed). When the library is configured in the main thread and SIGTERM
still has its default action, ranklog installs a handler that writes what is queued (for at most
``FLUSH_TIMEOUT`` seconds), restores the default action and sends SIGTERM again: the process dies
as before, with the same "killed by SIGTERM" status. A handler installed by the application (before
or after) is never replaced or wrapped; such handlers usually exit through ``sys.exit``, which
runs ``atexit`` and flushes anyway. Work that must happen before the flush (the flight recorder's
dump, :mod:`.flight_recorder`) registers with :func:`before_termination`.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from typing import Any

FLUSH_TIMEOUT = 2.0
_BEFORE: list[Callable[[], object]] = []


def before_termination(callback: Callable[[], object]) -> None:
    """Run `callback` when SIGTERM arrives, before the flush (a failing callback is ignored)."""
    _BEFORE.append(callback)


def install_sigterm_flush(flush: Callable[[float], object]) -> bool:
    """Install the flushing SIGTERM handler if SIGTERM has its default action; True when installed."""
    if threading.current_thread() is not threading.main_thread():
        return False
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return False

        def handler(signum: int, _frame: Any) -> None:
            try:
                for callback in _BEFORE:
                    try:
                        callback()
                    except Exception:
                        pass
                flush(FLUSH_TIMEOUT)
            finally:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        signal.signal(signal.SIGTERM, handler)
    except (ValueError, OSError):  # not the main interpreter, or signals unavailable
        return False
    return True
