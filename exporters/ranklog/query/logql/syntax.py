"""The tree a LogQL query parses into (:mod:`.logql` builds it; :mod:`.pipeline` and :mod:`.metric`
evaluate it). Frozen dataclasses: a parsed query is a value, cached and compared freely."""

from __future__ import annotations

from dataclasses import dataclass

Matcher = tuple[str, str, str]  # (label, op, value), op one of = != =~ !~


# -- pipeline stages ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class LineFilter:
    """``|= != |~ !~ |> !>`` with one or more patterns joined by ``or``: a positive filter keeps a line
    matching any of them, a negative one a line matching none."""

    op: str
    patterns: tuple[str, ...]


@dataclass(frozen=True)
class Decolorize:
    pass


@dataclass(frozen=True)
class JsonParser:
    params: tuple[tuple[str, str], ...] = ()  # (label, JSON path expression); empty: every field


@dataclass(frozen=True)
class LogfmtParser:
    params: tuple[tuple[str, str], ...] = ()
    strict: bool = False
    keep_empty: bool = False


@dataclass(frozen=True)
class RegexpParser:
    pattern: str


@dataclass(frozen=True)
class PatternParser:
    pattern: str


@dataclass(frozen=True)
class Unpack:
    pass


@dataclass(frozen=True)
class StringMatch:
    """A label predicate on the text: ``= != =~ !~`` (regexes fully anchored, as in selectors)."""

    name: str
    op: str
    value: str


@dataclass(frozen=True)
class ValueCompare:
    """A label predicate on a converted value: ``kind`` number, duration (seconds) or bytes."""

    name: str
    op: str  # == != > >= < <=
    kind: str
    value: float


@dataclass(frozen=True)
class And:
    left: LabelExpr
    right: LabelExpr


@dataclass(frozen=True)
class Or:
    left: LabelExpr
    right: LabelExpr


LabelExpr = StringMatch | ValueCompare | And | Or


@dataclass(frozen=True)
class LabelFilter:
    expr: LabelExpr


@dataclass(frozen=True)
class LineFormat:
    template: str


@dataclass(frozen=True)
class LabelFormat:
    """``dst=src`` renames (``template`` None), ``dst="{{…}}"`` sets from a template."""

    items: tuple[tuple[str, str | None, str | None], ...]  # (dst, src label, template)


@dataclass(frozen=True)
class DropKeep:
    """``| drop`` / ``| keep``: label names, or (name, op, value) matchers that must also hold."""

    keep: bool
    items: tuple[tuple[str, str | None, str | None], ...]


Stage = (LineFilter | Decolorize | JsonParser | LogfmtParser | RegexpParser | PatternParser | Unpack | LabelFilter
         | LineFormat | LabelFormat | DropKeep)
PARSER_STAGES = (JsonParser, LogfmtParser, RegexpParser, PatternParser, Unpack)


# -- queries -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LogSelector:
    """A log query: stream matchers and the pipeline after them."""

    matchers: tuple[Matcher, ...]
    stages: tuple[Stage, ...] = ()
    never: bool = False  # a matcher on a label no record has can never match

    @property
    def leading_filters(self) -> tuple[LineFilter, ...]:
        """The line filters before any other stage (the part a scan can evaluate on the text columns)."""
        out = []
        for stage in self.stages:
            if not isinstance(stage, LineFilter):
                break
            out.append(stage)
        return tuple(out)


@dataclass(frozen=True)
class Unwrap:
    label: str
    conversion: str = ""  # "", "duration" (seconds) or "bytes"
    post_filters: tuple[LabelFilter, ...] = ()


@dataclass(frozen=True)
class Grouping:
    labels: tuple[str, ...]
    without: bool = False


@dataclass(frozen=True)
class RangeAggregation:
    function: str
    selector: LogSelector
    range_ns: int
    offset_ns: int = 0
    unwrap: Unwrap | None = None
    param: float | None = None  # quantile_over_time's φ
    grouping: Grouping | None = None


@dataclass(frozen=True)
class VectorAggregation:
    op: str
    inner: MetricExpr
    grouping: tuple[str, ...] | None = None  # None: no grouping clause (everything in one series)
    without: bool = False
    param: float | None = None  # topk/bottomk's k


@dataclass(frozen=True)
class VectorMatching:
    on: bool  # on(...) when True, ignoring(...) otherwise
    labels: tuple[str, ...]
    group: str | None = None  # "left" / "right" for group_left / group_right
    include: tuple[str, ...] = ()


@dataclass(frozen=True)
class BinaryOp:
    op: str
    left: MetricExpr
    right: MetricExpr
    return_bool: bool = False
    matching: VectorMatching | None = None


@dataclass(frozen=True)
class Literal:
    value: float


@dataclass(frozen=True)
class VectorLiteral:
    """``vector(s)``: s as a series without labels, at every step."""

    value: float


@dataclass(frozen=True)
class LabelReplace:
    inner: MetricExpr
    dst: str
    replacement: str
    src: str
    regex: str


MetricExpr = RangeAggregation | VectorAggregation | BinaryOp | Literal | VectorLiteral | LabelReplace
Query = LogSelector | MetricExpr


def range_aggregations(expr: MetricExpr) -> list[RangeAggregation]:
    """Every range aggregation in `expr`, left to right."""
    if isinstance(expr, RangeAggregation):
        return [expr]
    if isinstance(expr, (VectorAggregation, LabelReplace)):
        return range_aggregations(expr.inner)
    if isinstance(expr, BinaryOp):
        return range_aggregations(expr.left) + range_aggregations(expr.right)
    return []
