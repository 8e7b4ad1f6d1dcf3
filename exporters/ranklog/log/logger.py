"""The fast logger returned by :func:`ranklog.get_logger`, and the process-wide state behind it.

:class:`RanklogLogger` is a real :class:`logging.Logger` (``isinstance`` checks, ``setLevel``,
``isEnabledFor``, ``addFilter``, ``addHandler`` all work), but its ``debug``/``info``/…/``log``
methods skip :class:`logging.LogRecord` creation: they check the level and hand the call
straight to the sink's queue. A :class:`logging.LogRecord` is built only when the logger has
filters other than :class:`SamplingFilter`, handlers of its own, or ``stack_info=True``.

These loggers live outside ``logging``'s hierarchy and do not propagate to the root logger, so a
record is written once even after :func:`ranklog.install` made the root logger structured; records
from WARNING on are also echoed to stderr (the ``console`` key, :mod:`.console`), and a handler
added to the logger sees every record. With ``enabled: false`` they behave exactly
like plain stdlib loggers (propagate to the root, nothing written by ranklog), so a script keeps
its normal output when ranklog is switched off.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from . import context
from .console import echo
from .log_config import LoggingConfig, resolve
from .records import format_exc, submit_record
from .sampling import SamplingFilter
from .termination import install_sigterm_flush
from .writer import Sink

_lock = threading.RLock()
_config: LoggingConfig | None = None
_sink: Sink | None = None
_loggers: dict[str, RanklogLogger] = {}
_NEVER = 100
_echo_at = _NEVER  # records from this level on are also echoed to stderr (.console)


def _level_method(levelno: int, name: str) -> Callable[..., None]:
    """``info``, ``warning``, …: one closure per level, so the hot path is a single Python call.

    Plain calls (no filters other than sampling, no handlers, no exc_info/stack_info) go straight
    to the sink; the rest takes :meth:`RanklogLogger._rl_emit`.
    """

    def method(self: RanklogLogger, msg: Any, *args: Any, exc_info: Any = None, extra: Any = None,
               stack_info: bool = False, stacklevel: int = 1) -> None:
        if self._rl_threshold <= levelno:
            if self._rl_fast and not exc_info and not stack_info:
                ctx = _current_trace() or context._process_default
                _sink.submit(levelno, self.name, msg, args, None, extra, ctx.trace_id if ctx is not None else None)
            else:
                self._rl_emit(levelno, msg, args, exc_info, extra, stack_info, stacklevel)
            if levelno >= _echo_at:
                echo(levelno, self.name, msg, args, format_exc(exc_info) if exc_info else None)
        elif self._rl_passthrough:
            self._rl_log(levelno, msg, args, exc_info, extra, stack_info, stacklevel + 1)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"Log `msg % args` at {logging.getLevelName(levelno)} (the stdlib signature)."
    return method


_current_trace = context._current.get


class RanklogLogger(logging.Logger):
    """A stdlib-compatible logger with a fast path into ranklog's queue."""

    def __init__(self, name: str, level: int = logging.NOTSET) -> None:
        super().__init__(name, level)
        self.propagate = False
        self._rl_threshold = _NEVER
        self._rl_passthrough = False
        self._rl_slow = False
        self._rl_fast = False

    # Thresholds: the logger's own level when set, else the configured ranklog level.
    def _rl_refresh(self) -> None:
        config = _config
        if config is None or not config.enabled or _sink is None:
            self._rl_threshold = _NEVER
            self._rl_passthrough = True
            self.propagate = True
            self.parent = logging.getLogger()
        else:
            self._rl_threshold = self.level or config.levelno
            self._rl_passthrough = False
            self.propagate = False
            self.parent = None
        self._rl_slow = bool(self.handlers) or any(not isinstance(f, SamplingFilter) for f in self.filters)
        self._rl_fast = not self._rl_slow and not self.filters

    def setLevel(self, level: int | str) -> None:
        super().setLevel(level)
        self._rl_refresh()

    def getEffectiveLevel(self) -> int:
        if self._rl_passthrough:
            return super().getEffectiveLevel()
        return self._rl_threshold

    def isEnabledFor(self, level: int) -> bool:
        if self._rl_passthrough:
            return super().isEnabledFor(level)
        return level >= self._rl_threshold

    def addFilter(self, filter: Any) -> None:
        super().addFilter(filter)
        self._rl_refresh()

    def removeFilter(self, filter: Any) -> None:
        super().removeFilter(filter)
        self._rl_refresh()

    def addHandler(self, hdlr: logging.Handler) -> None:
        super().addHandler(hdlr)
        self._rl_refresh()

    def removeHandler(self, hdlr: logging.Handler) -> None:
        super().removeHandler(hdlr)
        self._rl_refresh()

    # ---- the fast path -----------------------------------------------------------------------
    def _rl_emit(self, levelno: int, msg: Any, args: tuple, exc_info: Any, extra: Any,
                 stack_info: bool, stacklevel: int) -> None:
        if self._rl_slow or stack_info:
            self._rl_emit_slow(levelno, msg, args, exc_info, extra, stack_info, stacklevel + 1)
            return
        sample_rate = None
        if self.filters:
            for sampler in self.filters:
                decision = sampler.decide(levelno)
                if decision is False:
                    return
                if decision is not None:
                    sample_rate = decision
        ctx = context._current.get() or context._process_default
        _sink.submit(levelno, self.name, msg, args, format_exc(exc_info) if exc_info else None, extra,
                     ctx.trace_id if ctx is not None else None, sample_rate)

    def _rl_emit_slow(self, levelno: int, msg: Any, args: tuple, exc_info: Any, extra: Any,
                      stack_info: bool, stacklevel: int) -> None:
        if exc_info and not isinstance(exc_info, tuple):
            exc_info = format_exc_tuple(exc_info)
        fn, lno, func, sinfo = "(unknown file)", 0, "(unknown function)", None
        try:
            fn, lno, func, sinfo = self.findCaller(stack_info, stacklevel + 1)
        except ValueError:
            pass
        record = self.makeRecord(self.name, levelno, fn, lno, msg, args, exc_info, func, extra, sinfo)
        if not self.filter(record):
            return
        submit_record(_sink, record)
        for handler in self.handlers:
            if record.levelno >= handler.level:
                handler.handle(record)

    def _rl_log(self, levelno: int, msg: Any, args: tuple, exc_info: Any, extra: Any,
                stack_info: bool, stacklevel: int) -> None:
        if self._rl_passthrough and self.isEnabledFor(levelno):
            self._log(levelno, msg, args, exc_info=exc_info, extra=extra, stack_info=stack_info,
                      stacklevel=stacklevel + 1)

    debug = _level_method(logging.DEBUG, "debug")
    info = _level_method(logging.INFO, "info")
    warning = _level_method(logging.WARNING, "warning")
    warn = warning
    error = _level_method(logging.ERROR, "error")

    def exception(self, msg: Any, *args: Any, exc_info: Any = True, extra: Any = None,
                  stack_info: bool = False, stacklevel: int = 1) -> None:
        self.error(msg, *args, exc_info=exc_info, extra=extra, stack_info=stack_info, stacklevel=stacklevel + 1)

    critical = _level_method(logging.CRITICAL, "critical")
    fatal = critical

    def log(self, level: int, msg: Any, *args: Any, exc_info: Any = None, extra: Any = None,
            stack_info: bool = False, stacklevel: int = 1) -> None:
        if not isinstance(level, int):
            raise TypeError("level must be an integer")
        if level >= self._rl_threshold:
            self._rl_emit(level, msg, args, exc_info, extra, stack_info, stacklevel)
            if level >= _echo_at:
                echo(level, self.name, msg, args, format_exc(exc_info) if exc_info else None)
        elif self._rl_passthrough:
            self._rl_log(level, msg, args, exc_info, extra, stack_info, stacklevel + 1)


def format_exc_tuple(exc_info: Any) -> tuple:
    if isinstance(exc_info, BaseException):
        return (type(exc_info), exc_info, exc_info.__traceback__)
    import sys

    return sys.exc_info()


def get_logger(name: str | None = None) -> RanklogLogger:
    """A structured, rank-attributed logger (configured from the environment on first use)."""
    name = name or "root"
    with _lock:
        if _config is None:
            configure()
        logger = _loggers.get(name)
        if logger is None:
            logger = _loggers[name] = RanklogLogger(name)
            logger._rl_refresh()
        return logger


def configure(config: LoggingConfig | dict[str, Any] | str | None = None, **overrides: Any) -> LoggingConfig:
    """Set up the in-process library; returns the effective config.

    `config` is a :class:`LoggingConfig`, the ``logging:`` block as a dict (or ``{"logging": {…}}``),
    or the path of a YAML file with a ``logging:`` block; ``RANKLOG_*`` variables and keyword
    arguments override it (see :mod:`ranklog.log.log_config`). Calling it again with different
    settings flushes the current file and continues with the new settings. SIGTERM, when it still
    has its default action, is made to flush before the process dies (:mod:`.termination`).
    """
    global _config, _sink, _echo_at
    new = resolve(config, **overrides)
    with _lock:
        context.reload_from_env()
        if new != _config or (_sink is None and new.enabled):
            if _sink is not None:
                _sink.close()
            _sink = Sink(new) if new.enabled else None
            _config = new
        _echo_at = new.console_levelno if new.enabled else _NEVER
        for logger in _loggers.values():
            logger._rl_refresh()
    if new.enabled:
        install_sigterm_flush(flush)
        if new.flight_recorder:
            from .flight_recorder import enable

            enable(new.log_dir, new.job)
    return new


def current_config() -> LoggingConfig | None:
    return _config


def current_sink() -> Sink | None:
    """The process's sink (None when disabled or not configured yet)."""
    return _sink


def ensure_configured() -> Sink | None:
    if _config is None:
        with _lock:
            if _config is None:
                configure()
    return _sink


def flush(timeout: float = 10.0) -> bool:
    """Block until every record logged so far is written to disk (True when done in time)."""
    sink = _sink
    return sink.flush(timeout) if sink is not None else True


def shutdown(timeout: float = 10.0) -> None:
    """Write what is queued and close the file; the next log call or ``configure`` starts afresh."""
    global _config, _sink, _echo_at
    with _lock:
        if _sink is not None:
            _sink.close(timeout)
        _sink = None
        _config = None
        _echo_at = _NEVER
        for logger in _loggers.values():
            logger._rl_refresh()
