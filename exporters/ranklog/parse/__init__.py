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

Two groups: the formats, one module per format named after it in :mod:`.formats` (``ranklog``,
``ranklog_text``, ``json``, ``python``, ``ray``, ``torchrun``, ``verl``, ``text``), found by
:mod:`.registry`; and the machinery they share (:mod:`.contract` types, :mod:`.text_layouts` for
regex-layout text, :mod:`.json_bulk` for JSON lines, :mod:`.lines`, :mod:`.multiline`, :mod:`.batch`,
:mod:`.timestamps`, :mod:`.levels`, …). Recognition rules in :mod:`.detection`; whole directories in
:mod:`.directory`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .contract import Detected, ParseResult, SourceContext
from .detection import detect
from .identity_stage import with_source_identity
from .registry import parser_for, parsers


def parse(data: bytes, base_offset: int, ctx: SourceContext, *, final: bool, read_time_ns: int) -> ParseResult:
    """Parse the complete records in `data` (bytes of `ctx.source` from `base_offset`); the source's
    identity goes on every record (:mod:`.identity_stage`)."""
    return _identified(parser_for(ctx.format)(bytes(data), base_offset, ctx, final=final, read_time_ns=read_time_ns),
                       ctx)


def _identified(result: ParseResult, ctx: SourceContext) -> ParseResult:
    batch = with_source_identity(result.batch, ctx)
    return result if batch is result.batch else ParseResult(batch, result.consumed, result.errors)


def parse_many(items: Sequence[tuple[bytes, int, SourceContext, bool]], *, read_time_ns: int) -> list[ParseResult]:
    """:func:`parse` of several files' reads, (data, base_offset, ctx, final) each: reads of one format
    and options whose format can (``PARSERS_MANY``: the JSON-lines, text-layout and Ray formats) are
    parsed together in one pass over all their lines, the others one by one. The results, and each ctx's state after,
    are those of :func:`parse` on each read alone. A trickle's reads — a few lines of many files —
    then share the set-up costs of one parse."""
    results: list[ParseResult | None] = [None] * len(items)
    groups: dict[tuple[str, str], list[int]] = {}
    joint = parsers("PARSERS_MANY")
    for i, (_, _, ctx, _) in enumerate(items):
        if ctx.format in joint:
            groups.setdefault((ctx.format, json.dumps(ctx.options, sort_keys=True, default=repr)), []).append(i)
    for (fmt, _), members in groups.items():
        if len(members) > 1:
            for i, result in zip(members, joint[fmt]([items[i] for i in members], read_time_ns=read_time_ns),
                                 strict=True):
                results[i] = _identified(result, items[i][2])
    return [result if result is not None else parse(data, base, ctx, final=final, read_time_ns=read_time_ns)
            for result, (data, base, ctx, final) in zip(results, items, strict=True)]


def __getattr__(name: str) -> tuple[str, ...]:
    if name == "FORMATS":  # every format name (the registry imports the format modules on first use)
        return tuple(parsers())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["FORMATS", "Detected", "ParseResult", "SourceContext", "detect", "parse", "parse_many"]
