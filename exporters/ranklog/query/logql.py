"""The LogQL subset ranklog understands (the archive's Loki API, ``ranklog query`` 's positional
argument), parsed into a small tree; :mod:`.logql_spec` turns a log query into a QuerySpec.

Supported (anything else is a parse error in Loki's words, never a silently different answer):

- stream selectors ``{label op "value", …}`` with ``= != =~ !~``. The labels a record has are
  :data:`STREAM_LABELS`; any other label is absent on every record, so it equals "" (Loki's rule):
  ``{service_name=""}`` selects everything and ``{service_name="x"}`` nothing. An empty selector
  ``{}`` is accepted (Loki refuses it; the archive's time-bounded scans make it harmless).
- line filters ``|= != |~ !~`` with "double-quoted" (Go escapes) or `raw` strings, chained (AND);
- the parser stages ``| json`` and ``| logfmt`` (with or without parameters) and ``| drop …``,
  which Grafana's generated queries carry: they are accepted and change nothing, because a record's
  fields are already columns and labels here (label filters after them are not supported);
- range aggregations ``count_over_time``, ``rate``, ``bytes_over_time``, ``bytes_rate`` over
  ``[duration]``, and the vector aggregations ``sum count avg min max`` with ``by (…)`` or
  ``without (…)`` before or after the parenthesised argument, nested.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .filter_arrow import MATCHER_COLUMNS

STREAM_LABELS: tuple[str, ...] = MATCHER_COLUMNS
RANGE_FUNCTIONS = ("count_over_time", "rate", "bytes_over_time", "bytes_rate")
VECTOR_AGGREGATIONS = ("sum", "count", "avg", "min", "max")
NOOP_STAGES = ("json", "logfmt", "drop", "decolorize")
_DURATION_UNITS = {"ns": 1, "us": 10**3, "µs": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9,
                   "h": 3600 * 10**9, "d": 86400 * 10**9, "w": 7 * 86400 * 10**9, "y": 365 * 86400 * 10**9}
_DURATION = re.compile(r"(\d+)(ns|us|µs|ms|s|m|h|d|w|y)")
_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<string>"(?:[^"\\]|\\.)*"|`[^`]*`)
  | (?P<duration>\[[^\]]*\])
  | (?P<op>\|=|\|~|!=|!~|=~|=|\||\{|\}|\(|\)|,)
  | (?P<number>\d+(?:\.\d+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_.]*)
""", re.VERBOSE)


class LogQLError(ValueError):
    """A query outside the subset or not LogQL at all; the message is Loki's ``parse error at …``."""


@dataclass(frozen=True)
class LogSelector:
    """A log query: the stream matchers (label, op, value) and the line filters (op, pattern)."""

    matchers: tuple[tuple[str, str, str], ...]
    line_filters: tuple[tuple[str, str], ...] = ()
    never: bool = False  # a matcher on a label no record has can never match

    @property
    def label_matchers(self) -> tuple[tuple[str, str, str], ...]:
        return tuple(m for m in self.matchers if m[0] in STREAM_LABELS)


@dataclass(frozen=True)
class RangeAggregation:
    function: str
    selector: LogSelector
    range_ns: int


@dataclass(frozen=True)
class VectorAggregation:
    op: str
    inner: RangeAggregation | VectorAggregation
    grouping: tuple[str, ...] | None = None  # None: no grouping clause (everything in one series)
    without: bool = False


MetricExpr = RangeAggregation | VectorAggregation


@dataclass
class _Tokens:
    text: str
    items: list[tuple[str, str, int]] = field(default_factory=list)
    pos: int = 0

    def peek(self) -> tuple[str, str, int]:
        return self.items[self.pos] if self.pos < len(self.items) else ("end", "", len(self.text))

    def take(self) -> tuple[str, str, int]:
        token = self.peek()
        self.pos += 1
        return token

    def error(self, message: str, at: int | None = None) -> LogQLError:
        column = (self.peek()[2] if at is None else at) + 1
        return LogQLError(f"parse error at line 1, col {column}: {message}")

    def expect(self, kind: str, value: str | None = None) -> tuple[str, str, int]:
        token = self.peek()
        if token[0] != kind or (value is not None and token[1] != value):
            raise self.unexpected(value or kind)
        return self.take()

    def unexpected(self, wanted: str) -> LogQLError:
        kind, value, _ = self.peek()
        seen = "end of input" if kind == "end" else repr(value)
        return self.error(f"syntax error: unexpected {seen}, expecting {wanted}")


def _tokenize(text: str) -> _Tokens:
    tokens = _Tokens(text)
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise tokens.error(f"syntax error: unexpected character {text[position]!r}", position)
        kind = match.lastgroup or ""
        if kind != "space":
            tokens.items.append((kind, match.group(), position))
        position = match.end()
    return tokens


def _unquote(tokens: _Tokens, token: tuple[str, str, int]) -> str:
    raw = token[1]
    if raw.startswith("`"):
        return raw[1:-1]
    try:
        # Go's strconv.Unquote and JSON agree on the escapes Grafana produces (\" \\ \n \t \uXXXX).
        import json

        return json.loads(raw.replace("\\'", "'"))
    except ValueError:
        raise tokens.error(f"invalid string literal {raw}", token[2]) from None


def parse_duration_ns(text: str) -> int:
    """Nanoseconds of a Prometheus duration (``5m``, ``1h30m``, ``250ms``); ValueError otherwise."""
    position, total = 0, 0
    for match in _DURATION.finditer(text):
        if match.start() != position:
            break
        total += int(match.group(1)) * _DURATION_UNITS[match.group(2)]
        position = match.end()
    if position != len(text) or not text:
        raise ValueError(f"not a duration: {text!r}")
    return total


def _selector(tokens: _Tokens) -> LogSelector:
    tokens.expect("op", "{")
    matchers: list[tuple[str, str, str]] = []
    never = False
    while tokens.peek()[:2] != ("op", "}"):
        if matchers:
            tokens.expect("op", ",")
        name = tokens.expect("ident")[1]
        op_token = tokens.take()
        if op_token[0] != "op" or op_token[1] not in ("=", "!=", "=~", "!~"):
            tokens.pos -= 1
            raise tokens.unexpected("one of = != =~ !~")
        op = op_token[1]
        string = tokens.peek()
        value = _unquote(tokens, tokens.expect("string"))
        if op in ("=~", "!~"):
            _check_regex(tokens, "^(?:" + value + ")$", string[2])
        never = never or (name not in STREAM_LABELS and not _matches_absent(op, value))
        matchers.append((name, op, value))
    tokens.expect("op", "}")
    return LogSelector(tuple(matchers), (), never)


def _matches_absent(op: str, value: str) -> bool:
    """Whether the matcher accepts a label that is not there (its value is "")."""
    if op in ("=", "!="):
        return (value == "") == (op == "=")
    found = re.fullmatch(value, "") is not None
    return found == (op == "=~")


def _check_regex(tokens: _Tokens, pattern: str, at: int) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        pc.match_substring_regex(pa.array([""]), pattern)
    except (pa.ArrowInvalid, ValueError) as exc:
        raise tokens.error(f"invalid regular expression: {str(exc).splitlines()[0]}", at) from None


def _pipeline(tokens: _Tokens, selector: LogSelector) -> LogSelector:
    filters = list(selector.line_filters)
    while True:
        kind, value, _ = tokens.peek()
        if kind == "op" and value in ("|=", "!=", "|~", "!~"):
            tokens.take()
            string = tokens.peek()
            pattern = _unquote(tokens, tokens.expect("string"))
            if value in ("|~", "!~"):
                _check_regex(tokens, pattern, string[2])
            if tokens.peek()[:2] == ("ident", "or"):
                raise tokens.error("not supported by the ranklog archive: 'or' in line filters")
            filters.append((value, pattern))
        elif kind == "op" and value == "|":
            tokens.take()
            stage = tokens.peek()
            if stage[0] != "ident":
                raise tokens.unexpected("a pipeline stage")
            if stage[1] not in NOOP_STAGES:
                raise tokens.error(f"not supported by the ranklog archive: pipeline stage {stage[1]!r} "
                                   f"(supported: line filters, {', '.join(NOOP_STAGES)})")
            tokens.take()
            _stage_arguments(tokens)
        else:
            return LogSelector(selector.matchers, tuple(filters), selector.never)


def _stage_arguments(tokens: _Tokens) -> None:
    """Skip a no-op stage's parameters (``| json a="b", c``, ``| logfmt --strict``, ``| drop x``)."""
    while True:
        kind, value, _ = tokens.peek()
        if kind in ("ident", "string", "number") or (kind == "op" and value in ("=", ",")):
            tokens.take()
        else:
            return


def _log_query(tokens: _Tokens) -> LogSelector:
    return _pipeline(tokens, _selector(tokens))


def _grouping(tokens: _Tokens) -> tuple[tuple[str, ...], bool] | None:
    kind, value, _ = tokens.peek()
    if kind != "ident" or value not in ("by", "without"):
        return None
    tokens.take()
    tokens.expect("op", "(")
    labels: list[str] = []
    while tokens.peek()[:2] != ("op", ")"):
        if labels:
            tokens.expect("op", ",")
        labels.append(tokens.expect("ident")[1])
    tokens.expect("op", ")")
    return tuple(labels), value == "without"


def _metric(tokens: _Tokens) -> MetricExpr:
    kind, name, at = tokens.peek()
    if kind != "ident":
        raise tokens.unexpected("a metric expression")
    if name in VECTOR_AGGREGATIONS:
        tokens.take()
        grouping = _grouping(tokens)
        tokens.expect("op", "(")
        inner = _metric(tokens)
        tokens.expect("op", ")")
        after = _grouping(tokens)
        if grouping is not None and after is not None:
            raise tokens.error("syntax error: grouping given twice", at)
        grouping = grouping or after
        labels, without = grouping if grouping is not None else (None, False)
        return VectorAggregation(name, inner, labels, without)
    if name in RANGE_FUNCTIONS:
        tokens.take()
        tokens.expect("op", "(")
        if tokens.peek()[:2] == ("op", "("):  # count_over_time(({…} |= "x")[5m]) is valid LogQL too
            tokens.take()
            selector = _log_query(tokens)
            tokens.expect("op", ")")
        else:
            selector = _log_query(tokens)
        duration = tokens.expect("duration")
        try:
            range_ns = parse_duration_ns(duration[1][1:-1].strip())
        except ValueError:
            raise tokens.error(f"syntax error: bad range {duration[1]}", duration[2]) from None
        if range_ns <= 0:
            raise tokens.error("syntax error: the range must be positive", duration[2])
        selector = _pipeline(tokens, selector)  # Loki also allows the pipeline after the range
        tokens.expect("op", ")")
        return RangeAggregation(name, selector, range_ns)
    raise tokens.error(f"not supported by the ranklog archive: {name!r} (supported: "
                       f"{', '.join(RANGE_FUNCTIONS + VECTOR_AGGREGATIONS)})", at)


def parse(text: str) -> LogSelector | MetricExpr:
    """The tree of a LogQL query; :class:`LogQLError` (Loki's message) when it is outside the subset."""
    tokens = _tokenize(text)
    if tokens.peek()[0] == "end":
        raise tokens.error("syntax error: unexpected end of input, expecting a query")
    query: LogSelector | MetricExpr = _log_query(tokens) if tokens.peek()[:2] == ("op", "{") else _metric(tokens)
    if tokens.peek()[0] != "end":
        raise tokens.unexpected("end of input")
    return query


def selector_of(expr: MetricExpr) -> LogSelector:
    while isinstance(expr, VectorAggregation):
        expr = expr.inner
    return expr.selector


def range_of(expr: MetricExpr) -> RangeAggregation:
    while isinstance(expr, VectorAggregation):
        expr = expr.inner
    return expr


def parse_selector(text: str) -> LogSelector:
    """A stream selector (with optional line filters): what ``match[]`` and ``query`` of the label
    and series endpoints take."""
    query = parse(text)
    if not isinstance(query, LogSelector):
        raise LogQLError("parse error at line 1, col 1: a stream selector was expected, e.g. {job=\"x\"}")
    return query
