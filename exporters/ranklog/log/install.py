"""``ranklog.install()``: make the root logger structured, in one call.

Adds a :class:`RanklogHandler` to the root logger (replacing one added earlier, keeping the
user's other handlers such as a console handler — and ``logging.basicConfig()`` called afterwards
still adds one; without any, records from WARNING on are echoed to stderr as stdlib's ``lastResort``
would: :mod:`.console`), lowers the root level to the configured level,
routes :mod:`warnings` into logging (logger ``py.warnings``), and logs uncaught exceptions — in the
main thread and in other threads — as CRITICAL records with ``exc`` before the interpreter's usual
handling, then flushes, so a crashing rank leaves its traceback in its file.
"""

from __future__ import annotations

import logging
import sys
import threading
from typing import Any

from .context import current_trace_id
from .handler import RanklogHandler
from .log_config import LoggingConfig
from .logger import configure, ensure_configured, flush
from .records import format_exc


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
    _keep_basic_config_working()
    if capture_warnings:
        logging.captureWarnings(True)
    if excepthook:
        _install_excepthooks()
    return handler


def _keep_basic_config_working() -> None:
    """``logging.basicConfig()`` does nothing once the root logger has a handler, so after install() a
    script's own ``basicConfig(level=INFO)`` would silently lose its console. The wrapped function
    sets the console up when ranklog's handlers are the root's only ones (they stay attached)."""
    original = logging.basicConfig
    if getattr(original, "_ranklog", False):
        return

    def basic_config(**kwargs: Any) -> None:
        root = logging.getLogger()
        ours = [h for h in root.handlers if isinstance(h, RanklogHandler)]
        if not ours or len(ours) != len(root.handlers) or kwargs.get("force"):
            original(**kwargs)
            return
        level = root.level
        for handler in ours:
            root.removeHandler(handler)
        try:
            original(**kwargs)
        finally:
            for handler in ours:
                root.addHandler(handler)
            if "level" not in kwargs:
                root.setLevel(level)

    basic_config._ranklog = True  # type: ignore[attr-defined]
    basic_config.__doc__ = original.__doc__
    logging.basicConfig = basic_config


def _log_uncaught(exc_type: type[BaseException], exc: BaseException, tb: Any, where: str) -> None:
    if issubclass(exc_type, KeyboardInterrupt):
        return
    try:
        sink = ensure_configured()  # straight to the file: the interpreter's own hook prints the traceback
        if sink is not None:
            sink.submit(logging.CRITICAL, "ranklog", "uncaught exception%s: %s: %s", (where, exc_type.__name__, str(exc)),
                        format_exc((exc_type, exc, tb)), None, current_trace_id())
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
