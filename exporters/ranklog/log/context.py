"""Trace context: a correlation id that follows work across threads, tasks and processes.

Inside a process the current trace id lives in a :mod:`contextvars` variable, so ``with
trace("train_20251013_001"):`` covers everything logged in that block, including asyncio tasks
started inside it. Across processes it travels in ``RANKLOG_TRACE_CONTEXT``, a compact,
shell-safe string::

    trace_id=<id>,span_id=<16 hex>

``trace_id`` is percent-encoded (``urllib.parse.quote`` with no safe characters beyond
``-._~``), so any text works as an id; ``span_id`` names the parent span that handed the context
on. Extra ``key=value`` items are ignored, leaving room to grow. A W3C ``traceparent``
(``00-<32 hex>-<16 hex>-<2 hex>``) is accepted too. ``ranklog context`` prints a fresh value:
``export RANKLOG_TRACE_CONTEXT=$(ranklog context)``.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

ENV_VAR = "RANKLOG_TRACE_CONTEXT"
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")


@dataclass(frozen=True)
class TraceContext:
    trace_id: str
    span_id: str

    def encode(self) -> str:
        """The ``RANKLOG_TRACE_CONTEXT`` spelling of this context."""
        return f"trace_id={quote(self.trace_id, safe='')},span_id={self.span_id}"

    def child(self) -> TraceContext:
        """The same trace with a new span: what a process hands to the processes it starts."""
        return TraceContext(self.trace_id, new_span_id())


def new_trace_id() -> str:
    return secrets.token_hex(16)


def new_span_id() -> str:
    return secrets.token_hex(8)


def parse(text: str | None) -> TraceContext | None:
    """A context from its encoded form (or a W3C traceparent); None when absent or malformed."""
    if not text or not text.strip():
        return None
    text = text.strip()
    match = _TRACEPARENT.match(text)
    if match:
        return TraceContext(match.group(1), match.group(2))
    items: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if sep:
            items[key.strip()] = value.strip()
    trace_id = unquote(items.get("trace_id", ""))
    if not trace_id:
        return None
    span_id = items.get("span_id") or new_span_id()
    return TraceContext(trace_id, span_id)


def _inherited() -> TraceContext | None:
    return parse(os.environ.get(ENV_VAR))


_current: contextvars.ContextVar[TraceContext | None] = contextvars.ContextVar("ranklog_trace", default=None)
_process_default: TraceContext | None = _inherited()


def reload_from_env() -> None:
    """Re-read ``RANKLOG_TRACE_CONTEXT`` (the process default used outside any ``trace`` block)."""
    global _process_default
    _process_default = _inherited()


def current() -> TraceContext | None:
    """The active context: the innermost ``trace`` block, else the one inherited from the environment."""
    return _current.get() or _process_default


def current_trace_id() -> str | None:
    ctx = _current.get() or _process_default
    return ctx.trace_id if ctx is not None else None


@contextlib.contextmanager
def trace(trace_id: str | None = None) -> Iterator[TraceContext]:
    """Make `trace_id` (a fresh id when None) the trace of everything logged inside the block.

    Usable as ``with trace("run-42"):`` and as a decorator (``@trace("run-42")``).
    """
    ctx = TraceContext(trace_id or new_trace_id(), new_span_id())
    token = _current.set(ctx)
    try:
        yield ctx
    finally:
        _current.reset(token)


def new_context(trace_id: str | None = None) -> str:
    """A fresh encoded context (new trace id unless given): what ``ranklog context`` prints."""
    return TraceContext(trace_id or new_trace_id(), new_span_id()).encode()


def context_env() -> dict[str, str]:
    """Environment entries that make a child process inherit the current trace (empty when none)."""
    ctx = current()
    return {ENV_VAR: ctx.child().encode()} if ctx is not None else {}


_FORWARDED_ENV = ("RANKLOG_LOG_DIR", "RANKLOG_LEVEL", "RANKLOG_FORMAT", "RANKLOG_JOB", "RANKLOG_ENABLED",
                  "RANKLOG_ROTATION", "RANKLOG_RETENTION")


def ray_runtime_env(runtime_env: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A Ray ``runtime_env`` whose ``env_vars`` make Ray workers inherit the trace and ranklog settings.

    ``ray.init(runtime_env=ranklog.ray_runtime_env())`` or ``Actor.options(runtime_env=…)``;
    entries already in `runtime_env` win over the ones added here.
    """
    out: dict[str, Any] = dict(runtime_env or {})
    env_vars = {name: os.environ[name] for name in _FORWARDED_ENV if os.environ.get(name)}
    env_vars.update(context_env())
    env_vars.update(out.get("env_vars") or {})
    out["env_vars"] = env_vars
    return out
