"""`ranklog` format: the JSON lines written by ranklog's logger and `ranklog run` (DESIGN's field names)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..json_bulk import parse_json_lines, parse_json_lines_many

if TYPE_CHECKING:
    from ..contract import ParseResult, SourceContext

# The logger writes exactly the record's names; anything else (user `extra=` fields) goes to attrs.
RANKLOG_KEYS = ("ts", "level", "msg", "exc", "logger", "host", "ip", "pid", "rank", "local_rank", "job", "role",
                "trace_id", "step", "seq")
RANKLOG_MAPPING = {name: (name,) for name in RANKLOG_KEYS}


def parse_ranklog(data: bytes, base_offset: int, ctx: SourceContext, *, final: bool, read_time_ns: int) -> ParseResult:
    return parse_json_lines(data, base_offset, ctx, final=final, read_time_ns=read_time_ns, mapping=RANKLOG_MAPPING)


def parse_ranklog_many(items, *, read_time_ns: int) -> list[ParseResult]:
    return parse_json_lines_many(items, read_time_ns=read_time_ns, mapping=RANKLOG_MAPPING)


PARSERS = {"ranklog": parse_ranklog}
PARSERS_MANY = {"ranklog": parse_ranklog_many}
