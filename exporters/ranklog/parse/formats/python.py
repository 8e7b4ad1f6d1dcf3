"""`python` format: any line-oriented log — Python ``logging`` in any layout, glog-style lines (torch's
C++ and launcher logs), loguru, structlog's console, hydra, DeepSpeed, transformers, accelerate —
with tracebacks joined to the record they follow.

No list of layouts: each file's header layout is learned from its own lines
(:mod:`ranklog.parse.inference`), and the launcher prefixes in front of them (torch's ``[rank3]:``,
torchrun's ``[default0]:``, Ray's ``(Actor pid=…)``, a container runtime's ``<time> stdout F``) are
peeled. Any other line is kept whole as the message, with a level guessed from its keywords.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..text_layouts import TextFormat, parse_text_lines, parse_text_lines_many

if TYPE_CHECKING:
    from ..contract import ParseResult, SourceContext

PYTHON = TextFormat(layouts=(), learn=True)


def parse_python(data: bytes, base_offset: int, ctx: SourceContext, *, final: bool, read_time_ns: int) -> ParseResult:
    return parse_text_lines(data, base_offset, ctx, final=final, read_time_ns=read_time_ns, fmt=PYTHON)


def parse_python_many(reads, *, read_time_ns: int) -> list[ParseResult]:
    return parse_text_lines_many(reads, read_time_ns=read_time_ns, fmt=PYTHON)


PARSERS = {"python": parse_python}
PARSERS_MANY = {"python": parse_python_many}
