"""One line's head as a path of field tokens: what a header *could* be, before the file says what it is.

:func:`scan` walks a line (its launcher prefixes already peeled) from the start: a separator, then a
field of :mod:`.vocabulary`, again, until something is no field. It proposes, :mod:`.shapes` decides:
a message that happens to start with ``rank 3:`` yields a rank token here, and only the file's other
lines can make it a field. Each token is ``(separator, kind, spec)``, the spec being its syntax
(``iso+z``, ``U``, ``rank|=``, ``fb``), never its value, so that every line of one layout yields the
same path.

Kinds: ``time``, ``level``, ``rank``, ``code`` (strong: a line's layout may rest on them) and
``num``, ``word``, ``sword`` (a word followed by a mere blank), ``comp`` (a ``(word)``) (weak:
fields only where every line of the layout has them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .vocabulary import (
    CODE,
    DAY_FIRST,
    LEVEL_LETTER,
    LEVEL_LETTERS,
    LEVEL_WORD,
    LEVEL_WORDS,
    NUMBER,
    OPENERS,
    RANK,
    SEPARATOR,
    TIME_SYNTAXES,
    WORD,
    ZONE,
    is_distinctive,
    is_file_name,
    level_case,
    sep_key,
)

MAX_TOKENS = 8
# a column layout (rich's console) leaves the time's column blank when it did not change: blanks, then
# the level in capitals and the blanks that pad its column
_ALIGNED_LEVEL = re.compile(r"[ \t]+(?:" + "|".join(LEVEL_WORDS) + r")[ \t]")
STRONG = frozenset({"time", "level", "rank", "code"})
_ZONE = re.compile(ZONE)
_TIMES = [(syntax, re.compile(syntax.python)) for syntax in TIME_SYNTAXES]
_CLOSERS = "])}"
_BOUNDARY = frozenset(" \t])}|:,;-=>([{")
Token = tuple[str, str, str]  # (separator key, kind, spec)


@dataclass
class Scan:
    """The tokens of one line: keys, and what the decision needs besides (cut separators, word values)."""

    tokens: list[Token] = field(default_factory=list)
    trailing: str = ""  # separator key after the last token (opening brackets belong to the message)
    word: str | None = None  # the value of a trailing ``sword``
    numeric_next: bool = False  # … and whether the message after it starts with a digit

    def key(self) -> str:
        return path_key(self.tokens, self.trailing)


def cut(sep: str) -> str:
    """A separator key without its opening brackets: what stands between a field and the message when
    the next token turned out to be the message's."""
    return sep.rstrip(OPENERS)


def path_key(tokens: list[Token] | tuple[Token, ...], trailing: str) -> str:
    return "\x1e".join("\x1f".join(token) for token in tokens) + "\x1d" + trailing


def parse_key(key: str) -> tuple[tuple[Token, ...], str]:
    body, _, trailing = key.partition("\x1d")
    tokens = tuple(tuple(part.split("\x1f")) for part in body.split("\x1e")) if body else ()
    return tokens, trailing  # type: ignore[return-value]


def scan(line: str) -> Scan:
    """The field tokens at the head of `line` (none when it starts with a blank: a continuation)."""
    out = Scan()
    if not line or (line[0] in " \t" and not _ALIGNED_LEVEL.match(line)):
        return out
    pos = 0
    kinds: list[str] = []
    seps: list[str] = []
    while len(out.tokens) < MAX_TOKENS:
        sep = SEPARATOR.match(line, pos).group()
        if not out.tokens and sep.strip(OPENERS + " \t"):
            break  # a header starts with its first field, or with brackets (or blanks: see _ALIGNED_LEVEL)
        start = pos + len(sep)
        found = _field(line, start, sep, kinds)
        if found is None:
            break
        kind, spec, end = found
        out.tokens.append((sep_key(sep), kind, spec))
        seps.append(sep)
        kinds.append(kind)
        pos = end
        if kind == "sword":
            out.word = line[start:end]
            rest = line[end:].lstrip(" \t")
            out.numeric_next = rest[:1].isdigit()
            break
    last = SEPARATOR.match(line, pos).group()
    if out.tokens:
        last = _close_brackets(out, seps, last)
    out.trailing = cut(sep_key(last)) if out.tokens else ""
    return out


def _depth(sep: str) -> int:
    return sum(sep.count(ch) for ch in OPENERS) - sum(sep.count(ch) for ch in _CLOSERS)


def _close_brackets(out: Scan, seps: list[str], last: str) -> str:
    """A header closes the brackets it opens before its message starts: tokens inside a bracket that
    only the message closes (``[Rank 2 Error Snippet]:``) are the message's words — down to the
    longest head whose brackets are closed. A time keeps its head (no message word looks like one)."""
    if any(kind == "time" for _, kind, _ in out.tokens):
        return last
    depth, closed = 0, 0
    for k in range(1, len(seps) + 1):
        depth += _depth(seps[k - 1])
        after = seps[k] if k < len(seps) else last
        if depth - sum(after.count(ch) for ch in _CLOSERS) <= 0:
            closed = k
    if closed == len(seps):
        return last
    del out.tokens[closed:]
    out.word, out.numeric_next = None, False
    return seps[closed] if closed else ""


def _opened(sep: str) -> bool:
    return bool(sep) and sep[-1] in OPENERS


def _bounded(line: str, end: int) -> bool:
    return end >= len(line) or line[end] in _BOUNDARY


def _field(line: str, at: int, sep: str, kinds: list[str]) -> tuple[str, str, int] | None:
    """(kind, spec, end) of the field starting at `at`, or None."""
    if at >= len(line):
        return None
    if "time" not in kinds:
        found = _time(line, at)
        if found is not None:
            if found[1] == "glog":  # its level letter is part of it
                kinds.append("level")
            return found
    if "level" not in kinds:
        match = LEVEL_WORD.match(line, at)
        if match is None and "time" in kinds and line[at] in LEVEL_LETTERS:
            match = LEVEL_LETTER.match(line, at)
        if match is not None and _bounded(line, match.end()):
            after = SEPARATOR.match(line, match.end()).group()
            # a level that leads the line needs a mark or a time after it: "Error executing job" is a message
            aligned = not kinds and sep and not sep.strip()
            if kinds or aligned or _opened(sep) or is_distinctive(after) or _time(line, match.end() + len(after)):
                return "level", level_case(match.group()), match.end()
    if "rank" not in kinds:
        match = RANK.match(line, at)
        if match is not None:
            after = SEPARATOR.match(line, match.end()).group()
            mid = match.group("mid")
            if _opened(sep) or ":" in mid or "=" in mid or is_distinctive(after):
                spec = "|".join((match.group("label"), sep_key(mid), "/" if match.group("of") else ""))
                return "rank", spec, match.end()
    match = CODE.match(line, at)
    if match is not None and _bounded(line, match.end()) and "code" not in kinds:
        name, a, b = match.group("name"), match.group("a"), match.group("b")
        if is_file_name(name):
            return "code", "f" + ("a" if a else "") + ("b" if b else ""), match.end()
        if a or b:  # module:function:line (a bare name:number is a message's `step:3`)
            return "code", "m" + ("a" if a else "") + ("b" if b else ""), match.end()
    if kinds and kinds[-1] in ("time", "level", "num") and kinds.count("num") < 2:
        match = NUMBER.match(line, at)
        if match is not None and _bounded(line, match.end()):
            return "num", "", match.end()
    match = WORD.match(line, at)
    if match is not None and _bounded(line, match.end()):
        after = SEPARATOR.match(line, match.end()).group()
        if sep.endswith("(") and after.lstrip(" \t").startswith(")"):
            return "comp", "", match.end()
        more = match.end() + len(after) < len(line)  # a name is followed by a message (`config:` is one)
        if more and is_distinctive(after) and not after.lstrip(" \t").startswith(("(", "[", "{")):
            return "word", "", match.end()
        blank = after.rstrip(OPENERS)  # (an opening bracket after the blanks is the message's)
        if blank and not blank.strip(" \t") and match.end() < len(line):
            return "sword", "", match.end()
    return None


def _time(line: str, at: int) -> tuple[str, str, int] | None:
    best: tuple[str, str, int] | None = None
    for syntax, pattern in _TIMES:
        match = pattern.match(line, at)
        if match is None:
            continue
        end, spec = match.end(), syntax.name
        if syntax.zone_allowed:
            zone = _ZONE.match(line, end)
            if zone is not None:
                end, spec = zone.end(), spec + "+z"
        if not _bounded(line, end):
            continue
        if spec in DAY_FIRST:
            first, second = int(line[at:at + 2]), int(line[at + 3:at + 5])
            spec = DAY_FIRST[spec] if first > 12 else spec if second > 12 else "x" + spec
        if best is None or end > best[2]:
            best = ("time", spec, end)
    return best
