"""Parsers: raw log bytes of every training-log format → Arrow record batches, and format recognition.

The agent tails a file and calls :func:`parse` with the bytes it read; query and triage read whole
directories through :mod:`ranklog.parse.directory`. Contract (DESIGN.md, issue 4):

- `data` starts at byte `base_offset` of the file; each record's `offset` is the exact byte offset of
  its first line. Only complete lines are consumed; a multi-line record (traceback, indented
  continuation) is complete once the next record's first line is seen or when `final` is True, so
  ``consumed`` may stop before a pending record and the caller re-offers the rest with more data.
- Nothing is dropped: a malformed line becomes a `text` record with the error in `attrs`, invalid
  UTF-8 is replaced, ANSI colours are stripped. Only whitespace-only lines produce no record.
- ``ctx.state`` carries what must survive a restart (the Ray actor name of a worker file); a call
  updates it in place to the state after ``consumed`` bytes, so re-offering the unconsumed rest is
  always safe. Persist it with the checkpoint (it is plain JSON).
- ``ctx.fields`` are layout defaults (from :func:`detect`): record fields (job, rank, local_rank,
  pid, role) fill what a line lacks; other keys (attempt, stream, worker_id, …) are merged into
  ``attrs`` of every record, under the line's own attrs. ``host`` in it is informational (the
  context's ``host`` is what records get when the line has none).
- ``ctx.options``: ``mapping`` (json), ``regex`` (text), ``timezone`` (naive timestamps, default
  UTC), ``multiline_max_lines`` (2000), ``multiline_max_bytes`` (1 MiB), ``max_line_bytes`` (16 MiB:
  a line without newline longer than this is cut, attrs ``line_cut``).

Formats: see each module (``ranklog_json``, ``ranklog_text``, ``jsonl``, ``python``, ``ray``,
``torchrun``, ``verl``, ``text``); recognition rules in :mod:`.detection`; whole directories in
:mod:`.directory`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass
class SourceContext:
    source: str  # file path as the agent sees it
    source_id: str  # stable file identity (the agent computes it)
    format: str  # parser name, one of FORMATS
    host: str
    ip: str
    fields: dict[str, Any] = field(default_factory=dict)  # layout defaults: job, rank, local_rank, pid, role, + attrs
    state: dict[str, Any] = field(default_factory=dict)  # parser state persisted with the checkpoint (JSON)
    options: dict[str, Any] = field(default_factory=dict)  # mapping, regex, multiline limits, timezone


@dataclass
class ParseResult:
    batch: pa.RecordBatch  # record.arrow_schema(), one row per record
    consumed: int  # bytes of `data` that belong to complete records
    errors: int  # lines kept as `text` records because they did not parse


@dataclass(frozen=True)
class Detected:
    format: str
    fields: dict[str, Any]  # layout defaults for SourceContext.fields (host too, when the layout names it)


# Format name → "module:function" (imported on first use so `ranklog.parse` stays cheap to import).
_PARSERS: dict[str, str] = {
    "ranklog": "ranklog_json:parse_ranklog",
    "ranklog-text": "ranklog_text:parse_ranklog_text",
    "json": "jsonl:parse_json",
    "python": "python:parse_python",
    "ray": "ray:parse_ray",
    "torchrun": "torchrun:parse_torchrun",
    "torchrun-error": "torchrun:parse_torchrun_error",
    "verl-console": "verl:parse_verl_console",
    "verl-jsonl": "verl:parse_verl_jsonl",
    "text": "text:parse_text",
}
FORMATS: tuple[str, ...] = tuple(_PARSERS)


def parse(data: bytes, base_offset: int, ctx: SourceContext, *, final: bool, read_time_ns: int) -> ParseResult:
    """Parse the complete records in `data` (bytes of `ctx.source` from `base_offset`)."""
    try:
        target = _PARSERS[ctx.format]
    except KeyError:
        raise ValueError(f"unknown format {ctx.format!r}; known: {', '.join(FORMATS)}") from None
    module_name, function_name = target.split(":")
    module = importlib.import_module(f"{__name__}.{module_name}")
    return getattr(module, function_name)(bytes(data), base_offset, ctx, final=final, read_time_ns=read_time_ns)


def detect(path: str) -> Detected | None:
    """The format and layout defaults of the file at `path`, or None when it is not a log ranklog reads."""
    from .detection import detect as _detect  # (a submodule named `detect` would shadow this function)

    return _detect(path)


__all__ = ["FORMATS", "Detected", "ParseResult", "SourceContext", "detect", "parse"]
