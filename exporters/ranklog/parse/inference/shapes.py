"""Which tokens of a source's lines are fields: the evidence kept per source, and the decision.

Evidence is what the source's lines showed, counted: how many lines were looked at, and for every
token path (:mod:`.tokens`) how many lines had it. It lives in ``ctx.state`` (plain JSON), so it
survives restarts and grows as the file does: the first lines of a source (``SAMPLE_LINES``), then
every later line that looks like a header and fits none of the learned shapes.

The decision, for each path, keeps its head up to its last *strong* token (time, level, rank, code
position) that the layout shows — a prefix at least two lines share, or every header line of the
source when there is just one such line — and that makes a log line at all (a time, or a level word
leading two lines or the whole sample). Weak tokens between strong ones come with them (``- name -``
between a time and a level is a field wherever it sits). After the last strong token, a weak token
(a logger name, a pid, a ``(component)``) is a field only if at least ``CONSISTENT`` of the lines
sharing that head show it at that place; a word followed by a mere blank moreover needs the marks of
a name: at least ``MIN_NAMED`` lines, few distinct values, and no number after it (``step 3`` is a
message). So ``[rank3]`` at the start of one message is not a field of a file whose other lines do
not have it, and ``loss:`` starting a third of the messages is no logger.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from .tokens import Scan, Token, cut, parse_key, path_key
from .vocabulary import DAY_FIRST, TIME_BY_NAME

SAMPLE_LINES = 512  # lines (not blank) a source's layout is first learned from
DEFINING = frozenset({"time", "level"})  # a log line's layout is defined by where its time and level sit
CONSISTENT = 0.9  # share of a layout's lines that must show a weak field at its place
MIN_NAMED = 3  # lines that must show a blank-separated name before it counts as one
MAX_PATHS = 64  # token paths kept per source (the least seen go first)
MAX_VALUES = 8  # distinct values kept per blank-separated name
MAX_NAMES = 4  # distinct values a blank-separated name may take (a process logs through few loggers)


@dataclass
class Evidence:
    """What a source's lines showed (see the module docstring); ``to_state``/``from_state`` for ctx.state."""

    lines: int = 0
    paths: dict[str, int] = field(default_factory=dict)
    words: dict[str, list[Any]] = field(default_factory=dict)  # head key → [lines with a number next, values]

    @classmethod
    def from_state(cls, state: dict[str, Any] | None) -> Evidence:
        if not state:
            return cls()
        return cls(int(state.get("lines", 0)), dict(state.get("paths", {})),
                   {k: [v[0], list(v[1])] for k, v in state.get("words", {}).items()})

    def to_state(self) -> dict[str, Any]:
        return {"lines": self.lines, "paths": dict(self.paths), "words": {k: [v[0], list(v[1])] for k, v in self.words.items()}}

    def add(self, scans: list[Scan]) -> None:
        self.lines += len(scans)
        for one in scans:
            if not one.tokens:
                continue
            key = one.key()
            self.paths[key] = self.paths.get(key, 0) + 1
            if one.word is not None:
                head = path_key(one.tokens, "")
                numeric, values = self.words.setdefault(head, [0, []])
                self.words[head][0] = numeric + one.numeric_next
                if one.word not in values and len(values) < MAX_VALUES:
                    values.append(one.word)
        if len(self.paths) > MAX_PATHS:
            kept = sorted(self.paths.items(), key=lambda item: -item[1])[:MAX_PATHS]
            self.paths = dict(kept)

    def key(self) -> str:
        """A canonical text of the evidence (decisions are cached by it)."""
        return repr((self.lines, sorted(self.paths.items()), sorted((k, v[0], tuple(v[1])) for k, v in self.words.items())))


@dataclass(frozen=True)
class Shape:
    """A learned header layout: its field tokens, the separator before the message, lines that showed it."""

    tokens: tuple[Token, ...]
    trailing: str
    support: int


_DECIDED: dict[str, tuple[Shape, ...]] = {}  # evidence key → shapes (sources of one job share their layouts)


def decide(evidence: Evidence) -> tuple[Shape, ...]:
    """The source's header shapes, most specific first (see the module docstring)."""
    key = evidence.key()
    found = _DECIDED.get(key)
    if found is None:
        if len(_DECIDED) > 1024:
            _DECIDED.clear()
        _DECIDED[key] = found = _decision(evidence)
    return found


def _decision(evidence: Evidence) -> tuple[Shape, ...]:
    paths = [(*parse_key(key), count) for key, count in evidence.paths.items()]
    paths = [(_resolve_day_order(tokens, paths), trailing, count) for tokens, trailing, count in paths]
    heads = [(tokens, trailing, count) for tokens, trailing, count in paths if _is_candidate(tokens)]
    total = sum(count for _, _, count in heads)
    support: Counter[tuple[Token, ...]] = Counter()
    for tokens, _, count in heads:
        for k in range(1, len(tokens) + 1):
            support[tokens[:k]] += count
    timed_levels = {spec for tokens, _, _ in heads if any(kind == "time" for _, kind, _ in tokens)
                    for _, kind, spec in tokens if kind == "level"}
    defined = {tokens: _defined_length(tokens, support, total, evidence.lines, timed_levels) for tokens, _, _ in heads}
    shapes: Counter[tuple[tuple[Token, ...], str]] = Counter()
    for tokens, trailing, count in heads:
        k = defined[tokens]
        if not k:
            continue
        k = _extend(tokens, k, heads, defined, evidence)
        shapes[(tokens[:k], trailing if k == len(tokens) else cut(tokens[k][0]))] += count
    # the longer first (a line of a longer shape also fits its head), then the more common; a shape
    # with nothing between its last field and the message last (it fits the others' lines too)
    ordered = sorted(shapes.items(), key=lambda item: (-len(item[0][0]), item[0][1] == "", -item[1], item[0]))
    return tuple(Shape(tokens, trailing, count) for (tokens, trailing), count in ordered)


def _resolve_day_order(tokens: tuple[Token, ...], paths) -> tuple[Token, ...]:
    """``12/07/2026`` may be either order: the source's other dates decide (month first unless a day
    above 12 came first somewhere and no month above 12 did)."""
    if not any(kind == "time" and spec.startswith("x") for _, kind, spec in tokens):
        return tokens
    specs = {spec for other, _, _ in paths for _, kind, spec in other if kind == "time"}
    out = []
    for sep, kind, spec in tokens:
        if kind == "time" and spec.startswith("x"):
            month_first = spec[1:]
            spec = DAY_FIRST[month_first] if DAY_FIRST[month_first] in specs and month_first not in specs else month_first
        out.append((sep, kind, spec))
    return tuple(out)


def _is_candidate(tokens: tuple[Token, ...]) -> bool:
    return any(kind == "time" or (kind == "level" and spec != "1") for _, kind, spec in tokens)


def _time_syntax(spec: str):
    return TIME_BY_NAME.get(spec.split("+")[0].lstrip("x").replace("dmy", "mdy"))


def _defined_length(tokens: tuple[Token, ...], support: Counter, total: int, lines: int, timed_levels: set[str]) -> int:
    """How much of a path its time and level define: up to its last time or level that the layout
    shows (a date: one line; otherwise a prefix two lines share, or every header line when there is
    one; a level leading the line without a time: two lines, or the whole sample). Whatever sits
    before it is a field."""
    # a level in a column layout whose time column was left blank (rich prints a time once a second)
    # stands for a header of the source's timed layout
    aligned = tokens[0][0] == " " and tokens[0][1] == "level" and tokens[0][2] in timed_levels
    best = 0
    for k in range(1, len(tokens) + 1):
        if tokens[k - 1][1] not in DEFINING:
            continue
        shown = support[tokens[:k]]
        timed = aligned or any(kind == "time" and _time_syntax(spec).strong for _, kind, spec in tokens[:k])
        if shown < 2 and shown != total and not timed:  # (a line led by a date is a log line on its own)
            continue
        if not timed:
            led = any(kind == "time" or (kind == "level" and spec != "1") for _, kind, spec in tokens[:k])
            if not led or (shown < 2 and shown != lines):
                continue
        best = k
    return best


def _extend(tokens: tuple[Token, ...], k: int, heads, defined: dict, evidence: Evidence) -> int:
    """The fields after a path's time and level: each where at least CONSISTENT of the lines of its
    layout (the same time and level part) that show the fields before it show it too."""
    group = [(other, count) for other, _, count in heads if defined[other] == k and other[:k] == tokens[:k]]
    named = any(kind == "word" or (kind == "code" and spec.startswith("m")) for _, kind, spec in tokens[:k])
    while k < len(tokens):
        everyone = sum(count for _, count in group)
        group = [(other, count) for other, count in group if len(other) > k and other[k] == tokens[k]]
        showing = sum(count for _, count in group)
        if showing < CONSISTENT * everyone:
            break
        kind = tokens[k][1]
        if kind in ("word", "sword") and named:  # one name per layout: a second is the message's
            break
        if kind == "sword" and (tokens[k - 1][1] not in ("time", "level")
                                or not _plausible_name(evidence.words.get(path_key(tokens[:k + 1], "")), showing)):
            break  # (a name printed with blanks around it sits right after the time or the level)
        named = named or kind in ("word", "sword") or (kind == "code" and tokens[k][2].startswith("m"))
        k += 1
    return k


def _plausible_name(stats: list[Any] | None, lines: int) -> bool:
    """A blank-separated word is a logger name when enough lines show it, it takes few values, and
    what follows it is not a number (``step 3``, ``epoch 1`` are how messages start)."""
    if stats is None or lines < MIN_NAMED:
        return False
    numeric, values = stats
    return numeric * 2 < lines and len(values) <= min(MAX_NAMES, max(1, lines // 4))
