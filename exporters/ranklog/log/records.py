"""Conversions shared by the fast logger and the stdlib handler: exceptions and LogRecords to entries."""

from __future__ import annotations

import logging
import sys
import traceback
from typing import Any

from . import context

# Attributes every LogRecord has; anything else on a record came from ``extra=`` (or a filter).
_STANDARD_ATTRS = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


def format_exc(exc_info: Any) -> str | None:
    """Traceback text for ``exc_info`` as the logging API accepts it (True, an exception, a tuple)."""
    if not exc_info:
        return None
    if isinstance(exc_info, BaseException):
        exc_info = (type(exc_info), exc_info, exc_info.__traceback__)
    elif not isinstance(exc_info, tuple):
        exc_info = sys.exc_info()
    if exc_info[0] is None:
        return None
    return "".join(traceback.format_exception(*exc_info)).rstrip("\n")


def record_extra(record: logging.LogRecord) -> dict[str, Any] | None:
    extra = {k: v for k, v in record.__dict__.items() if k not in _STANDARD_ATTRS and k != "sample_rate"}
    return extra or None


def record_exc(record: logging.LogRecord) -> str | None:
    parts = []
    if record.exc_info:
        parts.append(format_exc(record.exc_info))
    elif record.exc_text:
        parts.append(record.exc_text)
    if record.stack_info:
        parts.append(record.stack_info)
    return "\n".join(p for p in parts if p) or None


def submit_record(sink: Any, record: logging.LogRecord) -> None:
    """Enqueue a stdlib LogRecord (message arguments are kept for the writer, like the fast path)."""
    sink.submit(record.levelno, record.name, record.msg, record.args or (), record_exc(record),
                record_extra(record), context.current_trace_id(), getattr(record, "sample_rate", None),
                ts_ns=int(record.created * 1e9))
