"""A learned shape as an RE2 pattern with named groups, for the columnar text engine.

The pattern is anchored, holds each field's generic syntax (:mod:`.vocabulary`) between the
separators the layout prints (blank runs as ``[ \\t]+``: padding varies), and ends in
``(?P<msg>.*)$``. Group names are what :mod:`ranklog.parse.text_layouts` fills records with:
record fields (``level``, ``logger``, ``rank``, ``local_rank``, ``pid``), times (``ts`` for an ISO time
with its zone, ``_tsn`` without, ``_t_<syntax>`` for the others, see :mod:`ranklog.parse.dating`),
and attributes (``file``, ``function``, ``line``, ``tid``, ``component``, …).
"""

from __future__ import annotations

import re
from functools import lru_cache

from .shapes import Shape
from .tokens import cut
from .vocabulary import LEVEL_LETTERS, TIME_BY_NAME, ZONE, level_fragment, rank_field

_NAME_CHAR_STOP = r"\s"


@lru_cache(maxsize=1024)
def shape_pattern(shape: Shape) -> str:
    """The RE2 pattern of `shape` (see the module docstring)."""
    names: set[str] = set()
    parts = ["^"]
    tokens = shape.tokens
    # a rank marker right before the message (``[Rank 3] Watchdog caught …``, DeepSpeed's ``log_dist``)
    # is what the library put in the message: the record gets the rank, the message keeps the marker
    marker = tokens[-1] if tokens and tokens[-1][1] == "rank" else None
    for i, (sep, kind, spec) in enumerate(tokens[:-1] if marker else tokens):
        parts.append(_separator(sep))
        following = tokens[i + 1][0] if i + 1 < len(tokens) else shape.trailing
        parts.append(_field(kind, spec, following, names))
    if marker is not None:
        sep, _, spec = marker
        before = cut(sep)
        parts.append(_separator(before, last=True))
        parts.append(f"(?P<msg>{re.escape(sep[len(before):])}{_field('rank', spec, '', names)}.*)$")
        return "".join(parts)
    parts.append(_separator(shape.trailing, last=True))
    parts.append("(?P<msg>.*)$")
    return "".join(parts)


def _separator(sep: str, *, last: bool = False) -> str:
    if not sep:
        return ""
    if sep == " ":
        return "[ \\t]+"
    out = []
    for i, ch in enumerate(sep):
        if ch == " ":
            out.append("[ \\t]?" if last and i == len(sep) - 1 else "[ \\t]+")
        else:
            out.append(re.escape(ch))
    return "".join(out)


def _name(wanted: str, names: set[str]) -> str:
    name, n = wanted, 2
    while name in names:
        name, n = f"{wanted}{n}", n + 1
    names.add(name)
    return name


def _stop(following: str) -> str:
    """The characters a free-form field cannot hold: blanks, and the mark that ends it when the
    separator after it starts with one (``name:``, ``name]``; ``a-b - INFO`` keeps its dash)."""
    mark = following[:1]
    return _NAME_CHAR_STOP + (re.escape(mark) if mark and mark != " " else "")


def _field(kind: str, spec: str, following: str, names: set[str]) -> str:
    if kind == "time":
        return _time(spec, names)
    if kind == "level":
        return f"(?P<{_name('level', names)}>{level_fragment(spec)})"
    if kind == "rank":
        label, mid, of = spec.split("|")
        field = rank_field(label) or "node_rank"
        return (re.escape(label) + _separator(mid) + f"(?P<{_name(field, names)}>\\d+)" + ("(?:/\\d+)?" if of else ""))
    if kind == "code":
        stop = "[^\\s:\\]|)]+"
        if spec.startswith("f"):
            middle = f"(?::{stop})?" if "a" in spec else ""
            tail = f"(?::{stop})?" if "b" in spec else ""
            return f"(?P<{_name('file', names)}>{stop}{middle}:\\d+{tail})"
        logger = _name("logger" if "logger" not in names else "module", names)
        out = f"(?P<{logger}>{stop})"
        if "a" in spec:
            out += f":(?P<{_name('function', names)}>{stop})"
        out += f":(?P<{_name('line', names)}>\\d+)"
        if "b" in spec:
            out += f":(?P<{_name('function', names)}>{stop})"
        return out
    if kind == "num":
        return f"(?P<{_name('pid' if 'pid' not in names else 'tid', names)}>\\d+)"
    if kind == "comp":
        return f"(?P<{_name('component', names)}>[^\\s()]+)"
    # word, sword
    return f"(?P<{_name('logger' if 'logger' not in names else 'name', names)}>[^{_stop(following)}]+)"


def _time(spec: str, names: set[str]) -> str:
    zoned = spec.endswith("+z")
    base = spec.split("+")[0]
    if base == "iso":
        syntax = TIME_BY_NAME["iso"]
        return f"(?P<{_name('ts', names)}>{syntax.re2}{ZONE})" if zoned else f"(?P<{_name('_tsn', names)}>{syntax.re2})"
    if base == "glog":
        return f"(?P<{_name('level', names)}>[{LEVEL_LETTERS}])(?P<{_name('_t_glog', names)}>{TIME_BY_NAME['glog'].re2})"
    syntax = TIME_BY_NAME[base.replace("dmy", "mdy")]
    return f"(?P<{_name('_t_' + base, names)}>{syntax.re2})"
