"""Stdlib integration: a handler that feeds ranklog's writer, and a formatter for any other handler.

``RanklogHandler`` is what :func:`ranklog.install` puts on the root logger; in ``dictConfig``::

    handlers:
      ranklog: {class: ranklog.RanklogHandler, level: INFO, log_dir: /var/log/train, format: json}

Keyword arguments (``log_dir``, ``format``, ``rotation``, …) are the ``logging:`` keys and
configure the process's one writer. ``JsonFormatter`` renders a record as one ranklog JSON line
(same fields, same ``seq`` rules) for handlers that are not ranklog's own, e.g. a
``StreamHandler`` to stdout in a container whose stdout is collected.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
from typing import Any

from . import context, process_identity
from .console import echo, has_console_handler
from .logger import configure, current_config, ensure_configured
from .records import record_exc, record_extra, submit_record
from .render import Renderer


class RanklogHandler(logging.Handler):
    """Sends stdlib records to ranklog's background writer (the caller only enqueues)."""

    def __init__(self, level: int | str = logging.NOTSET, **config: Any) -> None:
        super().__init__(level)
        if config or current_config() is None:
            configure(**config)

    def handle(self, record: logging.LogRecord) -> bool:
        # No handler lock: the queue is thread-safe and the writer thread does the I/O.
        rv = self.filter(record)
        if rv:
            self.emit(record)
        return bool(rv)

    def emit(self, record: logging.LogRecord) -> None:
        sink = ensure_configured()
        config = current_config()
        if sink is None or config is None or record.levelno < config.levelno:
            return
        try:
            submit_record(sink, record)
            if record.levelno >= config.console_levelno and not has_console_handler(
                    logging.root if record.name == "root" else logging.getLogger(record.name), RanklogHandler):
                echo(record.levelno, record.name, record.msg, record.args, record_exc(record))
        except Exception:
            self.handleError(record)


class JsonFormatter(logging.Formatter):
    """Formats a LogRecord as one ranklog JSON line (without the trailing newline)."""

    _counter = itertools.count(1)
    _counter_lock = threading.Lock()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()
        self._renderer: Renderer | None = None
        self._pid = -1

    def format(self, record: logging.LogRecord) -> str:
        pid = os.getpid()
        if self._renderer is None or pid != self._pid:
            self._pid = pid
            self._renderer = Renderer(process_identity.detect(), "json")
        with self._counter_lock:
            seq = next(JsonFormatter._counter)
        trace_id = context.current_trace_id()
        entry = (int(record.created * 1e9), record.levelno, record.name, record.msg, record.args, record_exc(record),
                 record_extra(record), trace_id, getattr(record, "sample_rate", None), None)
        return self._renderer.render_json(entry, seq).rstrip("\n")


def _reset_formatter_seq() -> None:
    JsonFormatter._counter = itertools.count(1)
    JsonFormatter._counter_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_formatter_seq)
