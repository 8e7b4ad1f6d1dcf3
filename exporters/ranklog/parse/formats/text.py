"""`text` format: any line-oriented log, optionally structured by a user regex.

``options["regex"]``: a regex (RE2 syntax, as pyarrow evaluates it) with named groups; group names
that are record fields (``ts``, ``level``, ``msg``, ``logger``, ``pid``, ``rank``, ``job``, …) fill the
record, every other group goes to ``attrs``. A line the regex does not match is kept whole as the
message. Without a regex the whole line is the message and the level is guessed from its keywords
(``ERROR``, ``Traceback``, ``WARNING``, ``FATAL`` …). Tracebacks and indented lines are joined in both
cases; ``options["timezone"]`` names the zone of naive timestamps.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from ranklog.errors import ConfigError

from ..text_layouts import Layout, TextFormat, parse_text_lines, parse_text_lines_many

if TYPE_CHECKING:
    from ..contract import ParseResult, SourceContext

PLAIN = TextFormat(layouts=())


@lru_cache(maxsize=64)
def text_format(regex: str | None) -> TextFormat:
    """The TextFormat for a user regex (validated once: a bad one is a config error naming the key)."""
    if not regex:
        return PLAIN
    if "(?P<" not in regex:
        raise ConfigError(f"regex: {regex!r} has no named group (use e.g. (?P<msg>.*))")
    try:
        pc.extract_regex(pa.array([""], pa.string()), regex)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ConfigError(f"regex: {regex!r} is not a valid RE2 pattern: {exc}") from None
    return TextFormat(layouts=(Layout("custom", regex),))


def parse_text(data: bytes, base_offset: int, ctx: SourceContext, *, final: bool, read_time_ns: int) -> ParseResult:
    fmt = text_format(ctx.options.get("regex"))
    return parse_text_lines(data, base_offset, ctx, final=final, read_time_ns=read_time_ns, fmt=fmt)


def parse_text_many(reads, *, read_time_ns: int) -> list[ParseResult]:
    """Reads of one options (parse.parse_many groups them so): one regex."""
    return parse_text_lines_many(reads, read_time_ns=read_time_ns, fmt=text_format(reads[0][2].options.get("regex")))


PARSERS = {"text": parse_text}
PARSERS_MANY = {"text": parse_text_many}
