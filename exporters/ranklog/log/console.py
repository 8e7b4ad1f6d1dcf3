"""The console echo: records at or above ``console`` (WARNING by default) are also written to stderr,
so ``kubectl logs``, Ray's driver console and ``torchrun --tee`` keep showing what went wrong.

The ranklog loggers (:func:`ranklog.get_logger`) do not propagate to the root logger (a record is
written once), so without the echo their warnings would reach no console. Records that stdlib
loggers send through :class:`~.handler.RanklogHandler` are echoed only when no console handler of
the user's (a ``StreamHandler`` on stderr or stdout) is on their way, so nothing prints twice: the
echo stands in for stdlib's ``lastResort``, which stops once ranklog's handler is on the root.
The line is stdlib's default format, ``LEVEL:logger:message``, followed by the traceback.
``console: off`` (``RANKLOG_CONSOLE=off``) turns it off; ``console: INFO`` echoes more.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from .render import message

OFF = 100


def echo(levelno: int, name: str, msg: Any, args: Any, exc: str | None) -> None:
    """Write one record to stderr as stdlib's default console format would."""
    text = f"{logging.getLevelName(levelno)}:{name}:{message(msg, args)}"
    if exc:
        text = f"{text}\n{exc}"
    try:
        stream = sys.stderr
        if stream is not None:
            stream.write(text + "\n")
            stream.flush()
    except (OSError, ValueError):
        pass  # a closed or broken stderr must not break logging


def has_console_handler(logger: logging.Logger, ours: type) -> bool:
    """Whether a record of `logger` meets a handler, not one of `ours`, that writes to stderr or stdout."""
    current: logging.Logger | None = logger
    while current is not None:
        for handler in current.handlers:
            if (isinstance(handler, logging.StreamHandler) and not isinstance(handler, ours)
                    and getattr(handler, "stream", None) in (sys.stderr, sys.stdout, sys.__stderr__, sys.__stdout__)):
                return True
        current = current.parent if current.propagate else None
    return False
