"""A log pipeline run on one entry at a time, with Loki's semantics (pkg/logql/log):

- an :class:`Entry` carries its line and three label sets: stream labels, structured metadata and
  the labels parsers and ``label_format`` added (``parsed``); a parsed name that collides with a
  stream label or a structured-metadata key gets the ``_extracted`` suffix, and the first value of
  a name wins;
- a parser that cannot read a line keeps it and sets ``__error__`` (``JSONParserErr``,
  ``LogfmtParserErr``) and ``__error_details__``;
- a label filter on a missing label drops the line (``=``/``!=`` text matchers compare ""); a value
  that does not convert (``step > "x"``) keeps the line and sets ``__error__=LabelFilterErr``;
- ``keep`` never drops ``__error__``/``__error_details__``; ``drop`` can.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ...query.logql import syntax as s
from ...query.logql.extract import (
    LinePattern,
    ParseFailure,
    compile_regexp,
    json_fields,
    json_selected,
    logfmt_fields,
    regexp_fields,
    unpack_fields,
)
from ...query.logql.labels import ERROR_DETAILS_LABEL, ERROR_LABEL
from ...query.logql.template import Template, TemplateError
from ...query.logql.values import bytes_value, go_duration_seconds, number_value

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
ERROR_LABELS = (ERROR_LABEL, ERROR_DETAILS_LABEL)


class Entry:
    """One log line going through a pipeline."""

    __slots__ = ("line", "meta", "parsed", "stream", "ts")

    def __init__(self, ts: int, line: str, stream: dict[str, str], meta: dict[str, str]) -> None:
        self.ts = ts
        self.line = line
        self.stream = stream
        self.meta = meta
        self.parsed: dict[str, str] = {}

    def get(self, name: str) -> str | None:
        for labels in (self.parsed, self.meta, self.stream):
            value = labels.get(name)
            if value is not None:
                return value
        return None

    def has_error(self) -> bool:
        return ERROR_LABEL in self.parsed

    def set_error(self, error: str, details: str) -> None:
        if ERROR_LABEL not in self.parsed:
            self.parsed[ERROR_LABEL] = error
            self.parsed[ERROR_DETAILS_LABEL] = details

    def extract(self, fields: dict[str, str]) -> None:
        """Add parsed fields (a name taken by a stream label or metadata key gets ``_extracted``)."""
        for name, value in fields.items():
            if name in self.stream or name in self.meta:
                name += "_extracted"
            self.parsed.setdefault(name, value)

    def assign(self, name: str, value: str) -> None:
        """``label_format``: overwrite the label wherever it lives, or add it."""
        for labels in (self.stream, self.meta, self.parsed):
            if name in labels:
                labels[name] = value
                return
        self.parsed[name] = value

    def remove(self, name: str) -> None:
        for labels in (self.stream, self.meta, self.parsed):
            labels.pop(name, None)

    def all_labels(self) -> dict[str, str]:
        return {**self.stream, **self.meta, **self.parsed}


Step = Callable[[Entry], bool]


# -- line filters -----------------------------------------------------------------------------------------
def line_matcher(op: str, patterns: tuple[str, ...]) -> Callable[[str], bool]:
    """Whether a line passes a line filter (positive: any pattern matches; negative: none does)."""
    if op in ("|=", "!="):
        def found(line: str) -> bool:
            return any(pattern in line for pattern in patterns)
    elif op in ("|~", "!~"):
        compiled = [re.compile(pattern, re.DOTALL) for pattern in patterns]

        def found(line: str) -> bool:
            return any(regex.search(line) is not None for regex in compiled)
    else:
        matchers = [LinePattern(pattern, parser=False) for pattern in patterns]

        def found(line: str) -> bool:
            return any(matcher.test(line) for matcher in matchers)
    positive = op in ("|=", "|~", "|>")
    return found if positive else (lambda line: not found(line))


def _line_filter(stage: s.LineFilter) -> Step:
    matches = line_matcher(stage.op, stage.patterns)
    return lambda entry: matches(entry.line)


# -- label filters ------------------------------------------------------------------------------------------
_CONVERT: dict[str, Callable[[str], float]] = {"number": number_value, "duration": go_duration_seconds,
                                               "bytes": bytes_value}
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b}


def string_matcher(op: str, value: str) -> Callable[[str], bool]:
    """A label matcher (``= != =~ !~``) on a label's text ("" when absent); regexes fully anchored."""
    if op == "=":
        return lambda text: text == value
    if op == "!=":
        return lambda text: text != value
    regex = re.compile(value, re.DOTALL)
    if op == "=~":
        return lambda text: regex.fullmatch(text) is not None
    return lambda text: regex.fullmatch(text) is None


def label_predicate(expr: s.LabelExpr) -> Step:
    if isinstance(expr, s.StringMatch):
        matches = string_matcher(expr.op, expr.value)
        name = expr.name
        return lambda entry: matches(entry.get(name) or "")
    if isinstance(expr, s.ValueCompare):
        convert, compare, name, wanted = _CONVERT[expr.kind], _COMPARE[expr.op], expr.name, expr.value

        def check(entry: Entry) -> bool:
            text = entry.get(name)
            if text is None:
                return False
            try:
                value = convert(text)
            except ValueError as exc:
                entry.set_error("LabelFilterErr", str(exc))
                return True
            return compare(value, wanted)

        return check
    left, right = label_predicate(expr.left), label_predicate(expr.right)
    if isinstance(expr, s.And):
        return lambda entry: left(entry) and right(entry)
    return lambda entry: left(entry) or right(entry)


# -- parsers and formatters -----------------------------------------------------------------------------------
def _parser(stage: s.Stage) -> Step:
    if isinstance(stage, s.JsonParser):
        params = stage.params
        read: Callable[[str], dict[str, str]] = (lambda line: json_selected(line, params)) if params else json_fields
    elif isinstance(stage, s.LogfmtParser):
        params, strict, keep_empty = stage.params, stage.strict, stage.keep_empty

        def read(line: str) -> dict[str, str]:
            return logfmt_fields(line, params, strict, keep_empty)
    elif isinstance(stage, s.RegexpParser):
        compiled = compile_regexp(stage.pattern)

        def read(line: str) -> dict[str, str]:
            return regexp_fields(compiled, line)
    elif isinstance(stage, s.PatternParser):
        pattern = LinePattern(stage.pattern, parser=True)
        read = pattern.matches
    else:
        def unpack(entry: Entry) -> bool:
            try:
                fields, entry.line = unpack_fields(entry.line)
            except ParseFailure as exc:
                entry.set_error(exc.error, exc.details)
                return True
            entry.extract(fields)
            return True

        return unpack

    def parse(entry: Entry) -> bool:
        try:
            entry.extract(read(entry.line))
        except ParseFailure as exc:
            entry.set_error(exc.error, exc.details)
        return True

    return parse


def _render(template: Template, entry: Entry) -> str:
    try:
        return template.render(entry.all_labels(), entry.line, entry.ts)
    except TemplateError as exc:
        entry.set_error("TemplateFormatErr", str(exc))
        return ""


def _line_format(stage: s.LineFormat) -> Step:
    template = Template(stage.template)

    def format_line(entry: Entry) -> bool:
        rendered = _render(template, entry)
        if not entry.has_error() or rendered:
            entry.line = rendered
        return True

    return format_line


def _label_format(stage: s.LabelFormat) -> Step:
    items = [(dst, src, Template(template) if template is not None else None) for dst, src, template in stage.items]

    def format_labels(entry: Entry) -> bool:
        values: list[tuple[str, str | None, str]] = []
        for dst, src, template in items:  # every right-hand side sees the labels before this stage
            if template is not None:
                values.append((dst, None, _render(template, entry)))
            else:
                values.append((dst, src, entry.get(src or "") or ""))
        for dst, src, value in values:
            if src is not None and src != dst:
                entry.remove(src)
            entry.assign(dst, value)
        return True

    return format_labels


def _drop_keep(stage: s.DropKeep) -> Step:
    items = [(name, string_matcher(op, value) if op is not None and value is not None else None)
             for name, op, value in stage.items]

    def selected(entry: Entry, name: str) -> bool:
        return any(item == name and (matcher is None or matcher(entry.get(name) or "")) for item, matcher in items)

    if stage.keep:
        def keep(entry: Entry) -> bool:
            for labels in (entry.stream, entry.meta, entry.parsed):
                for name in [n for n in labels if n not in ERROR_LABELS and not selected(entry, n)]:
                    del labels[name]
            return True

        return keep

    def drop(entry: Entry) -> bool:
        for name, matcher in items:
            value = entry.get(name)
            if value is not None and (matcher is None or matcher(value)):
                entry.remove(name)
        return True

    return drop


def _decolorize(entry: Entry) -> bool:
    entry.line = _ANSI.sub("", entry.line)
    return True


def compile_stage(stage: s.Stage) -> Step:
    if isinstance(stage, s.LineFilter):
        return _line_filter(stage)
    if isinstance(stage, s.LabelFilter):
        return label_predicate(stage.expr)
    if isinstance(stage, s.LineFormat):
        return _line_format(stage)
    if isinstance(stage, s.LabelFormat):
        return _label_format(stage)
    if isinstance(stage, s.DropKeep):
        return _drop_keep(stage)
    if isinstance(stage, s.Decolorize):
        return _decolorize
    return _parser(stage)


class Pipeline:
    """Compiled stages; :meth:`run` says whether an entry survives (and mutates it on the way)."""

    def __init__(self, stages: tuple[s.Stage, ...]) -> None:
        self.steps = [compile_stage(stage) for stage in stages]

    def __bool__(self) -> bool:
        return bool(self.steps)

    def run(self, entry: Entry) -> bool:
        return all(step(entry) for step in self.steps)


def uses_labels(stages: tuple[s.Stage, ...]) -> set[str] | None:
    """The label names the stages read, or None when they may read any (templates with ``.``,
    ``keep``, parsers whose output is unknown are fine: they only add labels)."""
    names: set[str] = set()

    def visit(expr: Any) -> None:
        if isinstance(expr, (s.StringMatch, s.ValueCompare)):
            names.add(expr.name)
        elif isinstance(expr, (s.And, s.Or)):
            visit(expr.left)
            visit(expr.right)

    for stage in stages:
        if isinstance(stage, s.LabelFilter):
            visit(stage.expr)
        elif isinstance(stage, (s.LineFormat, s.LabelFormat)):
            return None
        elif isinstance(stage, s.DropKeep):
            names.update(name for name, _, _ in stage.items)
    return names
