"""Is a source's ``format`` and ``options`` something the parsers accept? Answered before a byte is read.

``ranklog check-config`` and the agent at start ask :func:`source_problem` for every configured source,
so a typo (``verl-consol``, ``timezon:``, a regex RE2 refuses, a zone that does not exist) is found
where it was made, not when the first matching file appears on a node (the agent used to die there,
on every node at once). Beyond the names, the format's parser is run once over a few sample lines
with the options: anything it would raise on real lines it raises here, whatever option a parser
learns later. Option names are checked against :data:`OPTION_KEYS`, the options the parsers read
(a test keeps that list and the parsers' ``options`` lookups in step).
"""

from __future__ import annotations

import difflib
from typing import Any

from .contract import SourceContext
from .registry import parsers

AUTO = "auto"
OPTION_KEYS = ("mapping", "regex", "timezone", "multiline_max_lines", "multiline_max_bytes", "max_line_bytes")
# Lines of the kinds parsers meet, with a zone-less time so that `timezone` is applied too.
_SAMPLE = (b'{"ts": "2026-01-02 03:04:05", "level": "INFO", "msg": "a", "rank": 0}\n'
           b"2026-01-02 03:04:05,678 INFO train.py:12 - step:1 - loss:0.5\n"
           b"plain text line\n")


def _suggest(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    return f"did you mean {close[0]!r}? " if close else ""


def _known_zone(name: object) -> bool:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if not isinstance(name, str) or not name.strip():
        return False
    if name.strip().upper() == "UTC":
        return True
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def source_problem(fmt: str, options: dict[str, Any]) -> str | None:
    """Why a source with this format and options cannot be read (the key first), or None when it can."""
    known = list(parsers())
    if fmt != AUTO and fmt not in known:
        return f"format: unknown format {fmt!r} ({_suggest(fmt, known)}known: {AUTO}, {', '.join(known)})"
    if not isinstance(options, dict):
        return f"options: expected a mapping, got {type(options).__name__}"
    for key in options:
        if key not in OPTION_KEYS:
            return f"options.{key}: unknown option ({_suggest(str(key), list(OPTION_KEYS))}known: {', '.join(OPTION_KEYS)})"
    zone = options.get("timezone")
    if zone is not None and not _known_zone(zone):
        return f"options.timezone: {zone!r} is not a time zone (use UTC or a name such as Europe/Paris)"
    for key in ("multiline_max_lines", "multiline_max_bytes", "max_line_bytes"):
        value = options.get(key)
        if value is not None and (isinstance(value, bool) or not str(value).isdigit() or int(value) <= 0):
            return f"options.{key}: expected a positive whole number, got {value!r}"
    # `auto` picks a format per file: the options must suit any of them.
    for name in (known if fmt == AUTO else [fmt]):
        ctx = SourceContext(source="check", source_id="check", format=name, host="check", ip="127.0.0.1",
                            options=dict(options))
        try:
            parsers()[name](_SAMPLE, 0, ctx, final=True, read_time_ns=0)
        except Exception as exc:  # whatever the parser raises on lines, it raises on these
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            return f"options: the {name} parser refuses them: {text}"
    return None
