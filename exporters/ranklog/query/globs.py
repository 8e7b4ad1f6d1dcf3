"""Shell-style globs for ``--host`` / ``--logger``, compiled to RE2 (Arrow's and DuckDB's engine).

Python's :func:`fnmatch.translate` cannot be used: since 3.11 it emits atomic groups ``(?>…)`` for
patterns with two or more ``*``, which RE2 refuses. The syntax is fnmatch's (``*``, ``?``, ``[seq]``,
``[!seq]``) plus one addition so that any literal name can be selected: a backslash makes the next
character literal (``node\\*1`` is the host named ``node*1``). A pattern without an unescaped
wildcard is an exact name (matched with ``isin``, no regex at all).
"""

from __future__ import annotations

_WILDCARDS = frozenset("*?[")


def _lit(char: str) -> str:
    """One character as an RE2 literal: word characters as is, anything else as ``\\x{…}``."""
    return char if char.isascii() and (char.isalnum() or char == "_") else f"\\x{{{ord(char):x}}}"


def split_literal(pattern: str) -> str | None:
    """The exact name a pattern selects when it has no unescaped wildcard (escapes removed), else None."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            out.append(pattern[i + 1])
            i += 2
            continue
        if char in _WILDCARDS:
            return None
        out.append(char)
        i += 1
    return "".join(out)


def _char_class(body: str) -> str:
    """An fnmatch bracket body (without the brackets) as an RE2 class; empty or reversed ranges dropped."""
    negate = body[:1] == "!"
    if negate:
        body = body[1:]
    items: list[str] = []
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            lo, hi = body[i], body[i + 2]
            if lo <= hi:
                items.append(f"{_lit(lo)}-{_lit(hi)}")
            i += 3
        else:
            items.append(_lit(body[i]))
            i += 1
    if not items:
        return r"(?s:.)" if negate else r"\b\B"  # fnmatch: [!] of nothing is any char; [] nothing
    return "[" + ("^" if negate else "") + "".join(items) + "]"


def glob_to_re2(pattern: str) -> str:
    """An anchored RE2 pattern matching exactly the strings ``fnmatch.fnmatchcase`` would match.

    Total: every input yields a valid RE2 pattern (an unclosed ``[`` is a literal bracket, as in
    fnmatch), so a filter value can never make a scan fail.
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        i += 1
        if char == "\\" and i < n:
            out.append(_lit(pattern[i]))
            i += 1
        elif char == "*":
            if not out or out[-1] != ".*":  # runs of * are one
                out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[":
            j = i
            if j < n and pattern[j] == "!":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            close = pattern.find("]", j)
            if close < 0:
                out.append(_lit("["))
            else:
                out.append(_char_class(pattern[i:close]))
                i = close + 1
        else:
            out.append(_lit(char))
    return "(?s)^" + "".join(out) + "$"
