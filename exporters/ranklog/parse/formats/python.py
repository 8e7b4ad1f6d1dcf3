"""`python` format: the common `logging` layouts, glog-style lines (torch's C++ and launcher logs), loguru,
and Ray's Python log layout; tracebacks joined to the record they follow.

Layouts, tried in order (``TS`` is ``2026-12-02 13:04:05,123``, ``T`` separator, ``.`` or ``,``
before the fraction, optional ``Z``/offset):

- ``TS - name - LEVEL - msg``                  (``%(asctime)s - %(name)s - %(levelname)s - %(message)s``)
- ``[TS][name][LEVEL] - msg``                  (Hydra's default)
- ``TS | LEVEL    | module:function:line - msg`` (loguru's default)
- ``TS<tab or spaces>LEVEL file.py:42 -- msg`` (Ray's Python loggers)
- ``TS LEVEL name: msg``                       (``%(asctime)s %(levelname)s %(name)s: %(message)s``)
- ``TS LEVEL msg`` / ``TS [LEVEL] msg``        (the many ad-hoc variants)
- ``LEVEL:name:msg``                           (``logging.basicConfig()``'s default)
- ``I1202 13:04:05.123456 1234 file.cc:42] msg`` and ``[I1202 …] msg`` (glog; year from the read time)

Any other line is kept whole as the message, with a level guessed from its keywords. Prefixes
``[rank3]:`` (PyTorch's per-rank prefix) give `rank`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..text_layouts import Layout, TextFormat, parse_text_lines, parse_text_lines_many

if TYPE_CHECKING:
    from ..contract import ParseResult, SourceContext

TS = r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?"
LEVEL_WORD = r"DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL|TRACE|NOTICE"

PYTHON_LAYOUTS: tuple[Layout, ...] = (
    # fast twin: a logger name without spaces cannot hide a shorter " - LEVEL - " match, so the lazy
    # pattern would give the very same groups
    Layout("asctime-name-level", rf"^(?P<ts>{TS}) - (?P<logger>[^ ].*?) - (?P<level>{LEVEL_WORD}) - (?P<msg>.*)$",
           fast=rf"^(?P<ts>{TS}) - (?P<logger>[^ ]+) - (?P<level>{LEVEL_WORD}) - (?P<msg>.*)$"),
    Layout("hydra", rf"^\[(?P<ts>{TS})\]\[(?P<logger>[^\]]*)\]\[(?P<level>{LEVEL_WORD})\] - (?P<msg>.*)$"),
    Layout("loguru", rf"^(?P<ts>{TS}) \| (?P<level>{LEVEL_WORD}|SUCCESS) *\| (?P<logger>\S+?)(?::(?P<function>[^:\s]+):(?P<line>\d+))? - (?P<msg>.*)$"),
    Layout("ray-python", rf"^(?P<ts>{TS})\s+(?P<level>{LEVEL_WORD}) (?P<file>[\w.\-]+:\d+) -- (?P<msg>.*)$"),
    Layout("asctime-level-name", rf"^(?P<ts>{TS}) (?P<level>{LEVEL_WORD}) (?P<logger>[\w.\-\[\]]+): (?P<msg>.*)$"),
    Layout("asctime-level", rf"^(?P<ts>{TS})\s+[\[|]?\s*(?P<level>{LEVEL_WORD})\s*[\]|:]?\s+(?P<msg>.*)$"),
    Layout("basic", rf"^(?P<level>{LEVEL_WORD}):(?P<logger>[^:\s]*):(?P<msg>.*)$"),
    Layout("glog", r"^\[?(?P<level>[DIWEF])(?P<_month>\d\d)(?P<_day>\d\d) (?P<_time>\d\d:\d\d:\d\d(?:\.\d+)?) +(?P<pid>\d+) (?P<file>[^\] ]+:\d+)\] ?(?P<msg>.*)$"),
)
RANK_PREFIX = r"\[rank(?P<rank>\d+)\]: ?"  # PyTorch writes "[rank3]: " before each line

PYTHON = TextFormat(layouts=PYTHON_LAYOUTS, prefixes=(RANK_PREFIX,))


def parse_python(data: bytes, base_offset: int, ctx: SourceContext, *, final: bool, read_time_ns: int) -> ParseResult:
    return parse_text_lines(data, base_offset, ctx, final=final, read_time_ns=read_time_ns, fmt=PYTHON)


def parse_python_many(reads, *, read_time_ns: int) -> list[ParseResult]:
    return parse_text_lines_many(reads, read_time_ns=read_time_ns, fmt=PYTHON)


PARSERS = {"python": parse_python}
PARSERS_MANY = {"python": parse_python_many}
