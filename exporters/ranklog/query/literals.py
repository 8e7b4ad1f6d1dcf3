"""Literal strings that every match of an RE2 pattern must contain (a prefilter for regex search).

A search reads every message of the range; running RE2 once per message costs a call per row, while
looking for a required literal in a column's whole data buffer runs at memchr speed. The engine
keeps only the rows holding the literal and evaluates the real pattern on those, so the answer is
the pattern's own: this module only has to be *sound* — every string it returns must occur in every
match. It is therefore deliberately conservative and answers ``[]`` (no prefilter) whenever unsure:

- only literal runs at the top level of the pattern count; groups and classes are skipped whole;
- a top-level ``|``, a flag group such as ``(?i)``, ``\\Q…\\E``, octal escapes, a ``{`` that is not a
  plain ``{n}``/``{n,}``/``{n,m}`` repetition, or unbalanced brackets give up;
- a character followed by a quantifier (``?``, ``*``, ``+``, ``{…}``) leaves the run: it may be absent
  or repeated;
- case-insensitive searches get no literals (RE2 folds ``k`` with U+212A KELVIN SIGN, ``s`` with
  U+017F, which no byte search of a lowered literal would find).
"""

from __future__ import annotations

import re

_FLAG_GROUP = re.compile(r"\(\?[A-Za-z-]*\)")
_REPEAT = re.compile(r"\{\d+(?:,\d*)?\}")
_CLASS_ESCAPES = frozenset("dDsSwWbBAzCafnrtv")
_QUANTIFIERS = frozenset("?*+")


class _Unsure(Exception):
    """The pattern uses a construct this conservative reading does not handle."""


def _skip_class(pattern: str, i: int) -> int:
    """Index just past the character class starting at ``pattern[i] == '['``."""
    i += 1
    if i < len(pattern) and pattern[i] == "^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
        elif pattern.startswith("[:", i):
            end = pattern.find(":]", i + 2)
            if end < 0:
                raise _Unsure
            i = end + 2
        elif char == "]":
            return i + 1
        else:
            i += 1
    raise _Unsure


def _skip_group(pattern: str, i: int) -> int:
    """Index just past the group starting at ``pattern[i] == '('``."""
    depth = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            i = _skip_class(pattern, i)
            continue
        depth += {"(": 1, ")": -1}.get(char, 0)
        i += 1
        if depth == 0:
            return i
    raise _Unsure


def _skip_escape(pattern: str, i: int) -> tuple[int, str | None]:
    """(index past the escape at ``pattern[i] == '\\\\'``, the literal character it stands for or None)."""
    if i + 1 >= len(pattern):
        raise _Unsure
    char = pattern[i + 1]
    if not char.isascii() or not char.isalnum():
        return i + 2, char
    if char in _CLASS_ESCAPES:
        return i + 2, None
    if char in "pPx":
        if pattern.startswith("{", i + 2):
            end = pattern.find("}", i + 3)
            if end < 0:
                raise _Unsure
            return end + 1, None
        return i + (3 if char in "pP" else 4), None
    raise _Unsure  # \Q…\E, octal and anything unknown


def _runs(pattern: str) -> list[str]:
    runs: list[str] = []
    current: list[str] = []

    def close() -> None:
        if current:
            runs.append("".join(current))
            current.clear()

    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "|" or char == ")":
            raise _Unsure
        if char in _QUANTIFIERS or char == "{":
            if char == "{":
                repeat = _REPEAT.match(pattern, i)
                if repeat is None:
                    raise _Unsure
                i = repeat.end()
            else:
                i += 1
            if current:
                current.pop()  # the quantified character may be absent or repeated
            close()
            continue
        if char == "\\":
            i, literal = _skip_escape(pattern, i)
            if literal is None:
                close()
            else:
                current.append(literal)
            continue
        if char == "[":
            close()
            i = _skip_class(pattern, i)
        elif char == "(":
            close()
            i = _skip_group(pattern, i)
        elif char in ".^$":
            close()
            i += 1
        else:
            current.append(char)
            i += 1
        # a quantifier after a class or group applies to it: the closed run is unaffected
    close()
    return runs


def required_literals(pattern: str, ignore_case: bool = False) -> list[str]:
    """Strings every match of the RE2 `pattern` contains, longest first; ``[]`` when unsure."""
    if ignore_case or _FLAG_GROUP.search(pattern):
        return []
    try:
        runs = _runs(pattern)
    except _Unsure:
        return []
    return sorted({run for run in runs if run}, key=len, reverse=True)
