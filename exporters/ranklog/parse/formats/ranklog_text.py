"""`ranklog-text` format: the text layout of the ranklog logger (``format: text`` / ``.log`` files).

``<ts> <LEVEL> <logger> [k=v k=v …] <msg>``, e.g.
``2026-12-02T13:04:05.123456Z ERROR train [rank=3 step=12 job=j1] loss is nan``, with traceback lines
following (they belong to the record at any level: the writer puts ``exc`` there). Known keys in the brackets (rank, local_rank, pid, step, seq, job, role, trace_id, host, ip)
fill the record; the others go to attrs (numbers as numbers). Values may be double-quoted (``k="a b"``).
"""

from __future__ import annotations

import math
import shlex
from typing import TYPE_CHECKING, Any

from ..inference.vocabulary import LEVEL_WORDS, TIME_BY_NAME, ZONE
from ..text_layouts import Layout, TextFormat, parse_text_lines, parse_text_lines_many

if TYPE_CHECKING:
    from ..contract import ParseResult, SourceContext

TS = rf"{TIME_BY_NAME['iso'].re2}(?:{ZONE})?"
LEVEL_WORD = "|".join(LEVEL_WORDS)
RANKLOG_TEXT = Layout(
    "ranklog-text",
    rf"^(?P<ts>{TS}) +(?P<level>{LEVEL_WORD}) +(?P<logger>\S+) +(?:\[(?P<_kv>[^\]]*)\] +)?(?P<msg>.*)$",
)
_INT_KEYS = ("rank", "local_rank", "pid", "step", "seq")


def parse_pairs(values: list[str | None]) -> list[dict[str, Any]]:
    """`k=v k="v w"` text → dict per row (ints for the integer record fields)."""
    rows = []
    for text in values:
        row: dict[str, Any] = {}
        if text:
            try:
                tokens = shlex.split(text)
            except ValueError:
                tokens = text.split()
            for token in tokens:
                key, sep, value = token.partition("=")
                if not sep:
                    row.setdefault("tags", []).append(token)
                    continue
                if key in _INT_KEYS:
                    try:
                        row[key] = int(value)
                        continue
                    except ValueError:
                        key = f"{key}_text"
                row[key] = _number(value)
        rows.append(row)
    return rows


RANKLOG_TEXT_FORMAT = TextFormat(layouts=(RANKLOG_TEXT,), kv_hook=parse_pairs, traceback_follows_any_header=True,
                                 learn=True)


def parse_ranklog_text(data: bytes, base_offset: int, ctx: SourceContext, *, final: bool,
                       read_time_ns: int) -> ParseResult:
    return parse_text_lines(data, base_offset, ctx, final=final, read_time_ns=read_time_ns, fmt=RANKLOG_TEXT_FORMAT)


def _number(value: str) -> object:
    """Numbers stay numbers (so `loss=0.5` is a metric like in the JSON layout); the rest stays text."""
    try:
        return int(value)
    except ValueError:
        pass
    try:
        number = float(value)
    except ValueError:
        return value
    return number if math.isfinite(number) else value


def parse_ranklog_text_many(reads, *, read_time_ns: int) -> list[ParseResult]:
    return parse_text_lines_many(reads, read_time_ns=read_time_ns, fmt=RANKLOG_TEXT_FORMAT)


PARSERS = {"ranklog-text": parse_ranklog_text}
PARSERS_MANY = {"ranklog-text": parse_ranklog_text_many}
