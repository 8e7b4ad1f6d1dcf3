"""``ranklog.install()``: make the root logger structured, in one call.

Adds a :class:`RanklogHandler` to the root logger (replacing one added earlier, keeping the
user's other handlers such as a console handler), lowers the root level to the configured level,
routes :mod:`warnings` into logging (logger ``py.warnings``), and logs uncaught exceptions — in the
main thread and in other threads — as CRITICAL records with ``exc`` before the interpreter's usual
handling, then flushes, so a crashing rank leaves its traceback in its file.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

from .handler import RanklogHandler
from .log_config import LoggingConfig
from .logger import configure, flush, get_logger


def install(config: LoggingConfig | dict[str, Any] | str | None = None, *, excepthook: bool = True,
            capture_warnings: bool = True, **overrides: Any) -> RanklogHandler:
    """Configure ranklog and attach it to the root logger; returns the handler (idempotent)."""
    effective = configure(config, **overrides)
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, RanklogHandler)]:
        root.removeHandler(handler)
    handler = RanklogHandler()
    root.addHandler(handler)
    root.setLevel(effective.levelno)
    if capture_warnings:
        logging.captureWarnings(True)
    if excepthook:
        _install_excepthooks()
    return handler


def _log_uncaught(exc_type: type[BaseException], exc: BaseException, tb: Any, where: str) -> None:
    if issubclass(exc_type, KeyboardInterrupt):
        return
    try:
        get_logger("ranklog").critical("uncaught exception%s: %s: %s", where, exc_type.__name__, exc,
                                       exc_info=(exc_type, exc, tb))
        flush(timeout=5.0)
    except Exception:
        pass  # the interpreter's own hook still reports the exception


def _install_excepthooks() -> None:
    if getattr(sys.excepthook, "_ranklog", False):
        return
    previous = sys.excepthook

    def hook(exc_type, exc, tb):  # type: ignore[no-untyped-def]
        _log_uncaught(exc_type, exc, tb, "")
        previous(exc_type, exc, tb)

    hook._ranklog = True  # type: ignore[attr-defined]
    sys.excepthook = hook

    previous_thread = threading.excepthook

    def thread_hook(args):  # type: ignore[no-untyped-def]
        name = args.thread.name if args.thread is not None else "?"
        _log_uncaught(args.exc_type, args.exc_value, args.exc_traceback, f" in thread {name}")
        previous_thread(args)

    threading.excepthook = thread_hook
