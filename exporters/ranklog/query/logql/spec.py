"""A LogQL log query as the query engine's work: what a scan can do of it, and what is left per entry.

What the scan does (a :class:`QuerySpec`, so partition pruning, row-group statistics and the trace
and severe-rows indexes all apply): the stream matchers; the line filters that see the original line
(before any ``line_format``/``decolorize``/``unpack``), ``or`` alternatives as one regular
expression, pattern filters by their literals (a necessary condition, tested exactly afterwards);
and label filters on labels backed by a column (``step > 25``, ``logger="x"``,
``detected_level=~"error|warn"``) as an Arrow filter on each batch (:attr:`Plan.batch_filter`),
unless a parser, ``label_format``, ``drop`` or ``keep`` before them may have changed those labels. The rest of
the pipeline (:attr:`Plan.stages`) runs per entry (the archive's Loki API). Shared by the Loki API
and ``ranklog query LOGQL`` (:func:`with_selector`), so both select the same records the same way.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..filter_arrow import and_all, literal_alternatives, matcher_expression
from ..filters import QuerySpec
from . import syntax as s
from .labels import DETECTED_LEVEL, SERVICE_NAME, STREAM_COLUMNS

if TYPE_CHECKING:
    import pyarrow.dataset as ds

# Regex matchers that accept every value, the missing one included (Grafana's "All" is `.*`): dropped
# from the scan rather than evaluated on every row.
MATCH_ALL = frozenset({".*", "(.*)", ".*?", "^.*$"})
LINE_CHANGING = (s.LineFormat, s.Decolorize, s.Unpack)
LABEL_CHANGING = (s.LabelFormat, s.DropKeep)
INT_COLUMNS = frozenset({"rank", "local_rank", "step", "pid"})
# Labels a batch can be filtered on with an Arrow expression: column-backed labels.
COLUMN_LABELS = frozenset({*STREAM_COLUMNS, SERVICE_NAME, DETECTED_LEVEL, "local_rank", "role", "trace_id", "step",
                           "pid", "logger", "source"})
_DERIVED = {SERVICE_NAME: "job", DETECTED_LEVEL: "level"}


@dataclass(frozen=True)
class Plan:
    """How a selector is read: the engine's spec, a per-batch Arrow filter, the per-entry rest."""

    spec: QuerySpec
    batch_filter: ds.Expression | None
    stages: tuple[s.Stage, ...]
    filter_columns: tuple[str, ...] = ()  # the columns batch_filter reads


def _re2_escape(text: str) -> str:
    return re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\1", text)


def _pushed_line_filter(stage: s.LineFilter) -> list[tuple[str, str]]:
    """The stage as QuerySpec line filters (op, pattern), or [] when the scan cannot do it exactly."""
    if stage.op in ("|=", "!="):
        if len(stage.patterns) == 1:
            return [(stage.op, stage.patterns[0])]
        return [("|~" if stage.op == "|=" else "!~", "|".join(_re2_escape(p) for p in stage.patterns))]
    if stage.op in ("|~", "!~"):
        joined = stage.patterns[0] if len(stage.patterns) == 1 else "|".join(f"(?:{p})" for p in stage.patterns)
        return [(stage.op, joined)]
    return []


def _pattern_literals(stage: s.LineFilter) -> list[tuple[str, str]]:
    """For a single ``|>`` pattern: its literals must all be in the line (a prefilter; the stage stays)."""
    if stage.op != "|>" or len(stage.patterns) != 1:
        return []
    from ...query.logql.extract import LinePattern

    literals = [text for kind, text in LinePattern(stage.patterns[0], parser=False).nodes if kind == "lit" and text.strip()]
    return [("|=", literal) for literal in literals]


def label_expression(expr: s.LabelExpr) -> ds.Expression | None:
    """A label filter as an Arrow expression over the record's columns, or None when it is not exact."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    if isinstance(expr, s.StringMatch):
        if expr.name not in COLUMN_LABELS:
            return None
        return matcher_expression(expr.name, expr.op, expr.value)
    if isinstance(expr, s.ValueCompare):
        if expr.name not in INT_COLUMNS or expr.kind != "number":
            return None  # text columns and durations/bytes on ints convert with errors: per entry
        field, value = ds.field(expr.name), pa.scalar(expr.value, pa.float64())
        column = field.cast(pa.float64())
        return {"==": column == value, "!=": column != value, ">": column > value, ">=": column >= value,
                "<": column < value, "<=": column <= value}[expr.op]
    left, right = label_expression(expr.left), label_expression(expr.right)
    if left is None or right is None:
        return None
    return (left & right) if isinstance(expr, s.And) else (left | right)


def label_names(expr: s.LabelExpr) -> set[str]:
    """The label names a label filter expression reads."""
    if isinstance(expr, (s.StringMatch, s.ValueCompare)):
        return {expr.name}
    return label_names(expr.left) | label_names(expr.right)


def plan(selector: s.LogSelector, start_ns: int, end_ns: int, **extra: Any) -> Plan:
    """The scan and the per-entry rest for `selector` over [start_ns, end_ns)."""
    line_filters: list[tuple[str, str]] = []
    batch_parts: list[ds.Expression] = []
    filter_names: set[str] = set()
    rest: list[s.Stage] = []
    line_original = labels_original = True
    for stage in selector.stages:
        if isinstance(stage, s.LineFilter) and line_original:
            pushed = _pushed_line_filter(stage)
            line_filters += pushed or _pattern_literals(stage)
            if not pushed:
                rest.append(stage)
            continue
        if isinstance(stage, s.LabelFilter) and labels_original:
            expression = label_expression(stage.expr)
            if expression is not None:
                batch_parts.append(expression)
                filter_names.update(_DERIVED.get(name, name) for name in label_names(stage.expr))
                continue
        line_original = line_original and not isinstance(stage, LINE_CHANGING)
        # a parser may add a label a column leaves null (| json on a line with "step", a record without):
        # from then on a filter must see the entry's labels, not the column
        labels_original = labels_original and not isinstance(stage, (*LABEL_CHANGING, *s.PARSER_STAGES))
        rest.append(stage)
    contains = regex = None
    others: list[tuple[str, str]] = []
    for op, pattern in line_filters:  # the first |= and |~ take the indexed text-search path
        if op == "|=" and contains is None and pattern:
            contains = pattern
        elif op == "|~" and regex is None:
            regex = pattern
        else:
            others.append((op, pattern))
    matchers = tuple(m for m in selector.matchers if not (m[1] == "=~" and m[2] in MATCH_ALL) and
                     m[0] in _SPEC_MATCHABLE)
    spec = QuerySpec(start_ns=start_ns, end_ns=max(end_ns, start_ns + 1), contains=contains, regex=regex,
                     label_matchers=matchers, line_filters=tuple(others), trace_ids=_trace_ids(matchers),
                     **{"order": (), **extra})
    batch_filter = and_all(batch_parts) if batch_parts else None
    return Plan(spec, batch_filter, tuple(rest), tuple(sorted(filter_names)))


_SPEC_MATCHABLE = frozenset({"job", "host", "rank", "local_rank", "role", "level", "format", "trace_id", SERVICE_NAME,
                             DETECTED_LEVEL})


def _trace_ids(matchers: tuple[tuple[str, str, str], ...]) -> tuple[str, ...]:
    """The trace ids a positive ``trace_id`` matcher names, so the trace index picks the files to read
    (the matcher itself stays: the answer is the same, only fewer files are opened)."""
    for name, op, value in matchers:
        if name == "trace_id" and op in ("=", "=~"):
            values = [value] if op == "=" else literal_alternatives(value)
            if values and all(values):
                return tuple(values)
    return ()


def to_spec(selector: s.LogSelector, start_ns: int, end_ns: int, **extra: Any) -> QuerySpec:
    """The engine's spec for `selector` (what the scan itself does of it)."""
    return plan(selector, start_ns, end_ns, **extra).spec


def ordered(query_plan: Plan, forward: bool) -> Plan:
    return dataclasses.replace(query_plan, spec=dataclasses.replace(query_plan.spec, order=("ts",) if forward else ("-ts",)))


def with_selector(spec: QuerySpec, selector: s.LogSelector) -> QuerySpec:
    """`spec` narrowed by `selector` (``ranklog query '{rank="2"} |= "NCCL"' --level ERROR``): its matchers
    and the line filters a scan can do; its first ``|=`` / ``|~`` take the indexed ``contains`` /
    ``regex`` when the spec has none. Anything else in the pipeline is refused (ValueError): a
    selection that silently ignored a stage would be a wrong answer."""
    if selector.never:
        raise ValueError("the selector names a label no record has")
    planned = plan(selector, spec.start_ns or 0, spec.end_ns or 1)
    if planned.stages or planned.batch_filter is not None:
        raise ValueError("only stream matchers and line filters (|= != |~ !~) can narrow a record query; parsers, "
                         "label filters and formats need the archive's Loki API")
    contains, regex = spec.contains, spec.regex
    rest = list(spec.line_filters)
    for op, pattern in ((("|=", planned.spec.contains),) if planned.spec.contains else ()) + \
            ((("|~", planned.spec.regex),) if planned.spec.regex else ()) + planned.spec.line_filters:
        if op == "|=" and contains is None and not spec.ignore_case:
            contains = pattern
        elif op == "|~" and regex is None and not spec.ignore_case:
            regex = pattern
        else:
            rest.append((op, pattern))
    matchers = planned.spec.label_matchers
    return dataclasses.replace(spec, contains=contains, regex=regex, line_filters=tuple(rest),
                               label_matchers=spec.label_matchers + matchers,
                               trace_ids=spec.trace_ids or _trace_ids(matchers))
