"""SIGTERM always ends the agent, within its drain timeout, whatever its reading thread is doing.

Python runs signal handlers in the main thread between bytecodes, so an agent whose main thread was
stuck in a system call (once: ``open()`` of a FIFO) ignored SIGTERM for good. The C-level handler
also writes the signal's number to a wakeup file descriptor (``signal.set_wakeup_fd``) at once,
whatever the main thread does; a watcher thread reads it, sets the stop event (the normal shutdown:
what was read gets ``shutdown_timeout`` to be acknowledged, then the checkpoint is written) and arms a
deadline: if the process is still there ``shutdown_timeout`` + :data:`CLOSE_GRACE` seconds later, it
logs why and exits with status 1 without the final checkpoint — which only means that what was read
since the last one is read again at the next start (the archive drops what it already holds).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

CLOSE_GRACE = 5.0  # beyond shutdown_timeout: stopping the threads and writing the checkpoint
_SIGNALS = (signal.SIGTERM, signal.SIGINT)

log = logging.getLogger("ranklog.agent")


def install(stop: threading.Event, shutdown_timeout: float) -> None:
    """Make SIGTERM/SIGINT set `stop`, and end the process if it is not gone in time (call from the
    main thread)."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    for signum in _SIGNALS:
        signal.signal(signum, lambda *_: stop.set())

    def watch() -> None:
        while True:
            try:
                data = os.read(read_end, 64)
            except OSError:
                return
            if not data:
                return
            if any(byte in (int(s) for s in _SIGNALS) for byte in data):
                stop.set()
                _deadline(shutdown_timeout + CLOSE_GRACE)
                return

    threading.Thread(target=watch, name="ranklog-stop-signals", daemon=True).start()


def _deadline(seconds: float) -> None:
    time.sleep(seconds)
    log.error("still running %.0f s after SIGTERM (a read or open is stuck in the kernel?): exiting now; what was "
              "read since the last checkpoint is read again at the next start", seconds)
    logging.shutdown()
    os._exit(1)
