"""LogQL parsed into :mod:`.syntax`'s tree. The archive answers (Loki's grammar, Loki's messages):

- stream selectors ``{label op "value", …}`` with ``= != =~ !~`` over :data:`.labels.SELECTOR_LABELS`
  (any other label is absent on every record, i.e. ``""``: ``{service="x"}`` selects nothing). An
  empty selector ``{}`` is accepted (Loki refuses it; the archive's scans are time-bounded).
- the log pipeline: line filters ``|= != |~ !~`` and pattern filters ``|> !>``, each with ``or``
  alternatives; ``| decolorize``; the parsers ``| json`` and ``| logfmt`` (with parameters and
  ``--strict``/``--keep-empty``), ``| regexp "…"``, ``| pattern "…"``, ``| unpack``; label filter
  expressions (``= != =~ !~`` on text; ``== != > >= < <=`` on numbers, durations ``10s`` and byte
  sizes ``20MB``; ``and`` (also ``,`` or a space), ``or``, parentheses); ``| line_format "{{…}}"``,
  ``| label_format dst=src, dst="{{…}}"``, ``| drop …`` and ``| keep …``.
- metric queries: ``count_over_time rate bytes_over_time bytes_rate absent_over_time`` over a log
  range ``[d]`` (with ``offset d``); ``| unwrap label`` (``duration(…)``, ``duration_seconds(…)``,
  ``bytes(…)``) with ``sum_ avg_ min_ max_ stdvar_ stddev_ quantile_ first_ last_over_time`` and
  ``rate``, grouped ``by``/``without``; vector aggregations ``sum avg min max count stddev stdvar
  topk bottomk sort sort_desc`` with ``by``/``without`` before or after the argument;
  ``label_replace``; ``vector(s)``; number literals; binary operators ``+ - * / % ^``, comparisons
  (with ``bool``), ``and or unless`` between vectors (``on``/``ignoring``, ``group_left``/
  ``group_right``) and with scalars, by PromQL's precedence.

Anything else (``ip()`` filters, ``rate_counter``, ``approx_topk``…) is a 400 in Loki's words,
never a silently different answer. Bounds against abusive queries: :data:`MAX_MATCHERS` matchers in
a selector, :data:`MAX_STAGES` pipeline stages, :data:`MAX_DEPTH` levels of nesting.
"""

from __future__ import annotations

import re

from . import syntax as s
from .labels import SELECTOR_LABELS
from .lexer import LogQLError, Tokens, tokenize, unquote
from .values import bytes_value, prometheus_duration_ns, query_duration_seconds

__all__ = ["MAX_MATCHERS", "LogQLError", "parse", "parse_duration_ns", "parse_selector"]

MAX_MATCHERS = 256
MAX_STAGES = 256
MAX_DEPTH = 64
MAX_RANGE_NS = 10**18  # 31 years: a window's arithmetic stays inside int64
RANGE_FUNCTIONS = ("count_over_time", "rate", "bytes_over_time", "bytes_rate", "absent_over_time")
UNWRAP_FUNCTIONS = ("sum_over_time", "avg_over_time", "min_over_time", "max_over_time", "stdvar_over_time",
                    "stddev_over_time", "quantile_over_time", "first_over_time", "last_over_time")
# Unwrapped range aggregations that may carry by/without (Loki: not sum_over_time, rate, absent_over_time).
GROUPABLE_RANGE = frozenset(UNWRAP_FUNCTIONS) - {"sum_over_time"}
VECTOR_AGGREGATIONS = ("sum", "avg", "min", "max", "count", "stddev", "stdvar", "topk", "bottomk", "sort",
                       "sort_desc")
PARAMETER_AGGREGATIONS = ("topk", "bottomk")
UNSUPPORTED_FUNCTIONS = ("rate_counter", "approx_topk", "count_values", "quantile", "label_join")
LINE_FILTER_OPS = ("|=", "!=", "|~", "!~", "|>", "!>")
COMPARISONS = ("==", "!=", ">", ">=", "<", "<=")
# PromQL's binary operator precedence (higher binds tighter); ^ is right-associative.
PRECEDENCE = {"or": 1, "and": 2, "unless": 2, "==": 3, "!=": 3, ">": 3, ">=": 3, "<": 3, "<=": 3,
              "+": 4, "-": 4, "*": 5, "/": 5, "%": 5, "^": 6}
_UNIT_SUFFIX = re.compile(r"^(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?P<unit>[a-zA-Zµμ].*)?$")


def parse_duration_ns(text: str) -> int:
    """Nanoseconds of a Prometheus duration (``5m``, ``1h30m``, ``250ms``); ValueError otherwise."""
    return prometheus_duration_ns(text)


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens: Tokens = tokenize(text)
        self.depth = 0

    # -- helpers ------------------------------------------------------------------------------------
    def nested(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.tokens.error(f"the query nests deeper than {MAX_DEPTH} levels")

    def string(self) -> str:
        return unquote(self.tokens, self.tokens.expect("string", wanted="a string"))

    def ident(self, wanted: str = "a label name") -> str:
        return self.tokens.expect("ident", wanted=wanted)[1]

    def check_regex(self, pattern: str, at: int) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        try:
            pc.match_substring_regex(pa.array([""]), pattern)
        except (pa.ArrowInvalid, ValueError) as exc:
            raise self.tokens.error(f"invalid regular expression: {str(exc).splitlines()[0]}", at) from None

    def number(self, wanted: str = "a number") -> float:
        negative = self.tokens.accept("op", "-") is not None
        token = self.tokens.expect("number", wanted=wanted)
        try:
            value = float(token[1])
        except ValueError:
            raise self.tokens.error(f"syntax error: unexpected {token[1]!r}, expecting {wanted}", token[2]) from None
        return -value if negative else value

    # -- selector and pipeline ----------------------------------------------------------------------
    def selector(self) -> s.LogSelector:
        tokens = self.tokens
        tokens.expect("op", "{")
        matchers: list[s.Matcher] = []
        never = False
        while not tokens.at("op", "}"):
            if matchers:
                tokens.expect("op", ",", wanted="',' or '}'")
                if tokens.at("op", "}"):
                    break
            if len(matchers) >= MAX_MATCHERS:
                raise tokens.error(f"too many label matchers in one selector (limit {MAX_MATCHERS})")
            name = self.ident()
            op_token = tokens.peek()
            if op_token[0] != "op" or op_token[1] not in ("=", "!=", "=~", "!~"):
                raise tokens.unexpected("one of = != =~ !~")
            tokens.take()
            at = tokens.peek()[2]
            value = self.string()
            if op_token[1] in ("=~", "!~"):
                self.check_regex("^(?:" + value + ")$", at)
            never = never or (name not in SELECTOR_LABELS and not _matches_absent(op_token[1], value))
            matchers.append((name, op_token[1], value))
        tokens.expect("op", "}")
        return s.LogSelector(tuple(dict.fromkeys(matchers)), (), never)

    def pipeline(self, unwrap_allowed: bool = False) -> tuple[tuple[s.Stage, ...], s.Unwrap | None]:
        """Stages up to the end of the pipeline, and the unwrap stage (with its filters) if any."""
        tokens = self.tokens
        stages: list[s.Stage] = []
        unwrap: s.Unwrap | None = None
        while True:
            kind, value, at = tokens.peek()
            if len(stages) > MAX_STAGES:
                raise tokens.error(f"too many pipeline stages (limit {MAX_STAGES})")
            if kind == "op" and value in LINE_FILTER_OPS:
                if unwrap is not None:
                    raise tokens.error("syntax error: only label filters may follow unwrap", at)
                stages.append(self.line_filter())
            elif kind == "op" and value == "|":
                tokens.take()
                stage_at = tokens.peek()[2]
                if tokens.at("ident", "unwrap"):
                    if not unwrap_allowed or unwrap is not None:
                        raise tokens.error("syntax error: unexpected unwrap", stage_at)
                    tokens.take()
                    unwrap = self.unwrap()
                    continue
                stage = self.stage()
                if unwrap is not None:
                    if not isinstance(stage, s.LabelFilter):
                        raise tokens.error("syntax error: only label filters may follow unwrap", stage_at)
                    unwrap = s.Unwrap(unwrap.label, unwrap.conversion, (*unwrap.post_filters, stage))
                else:
                    stages.append(stage)
            else:
                return tuple(stages), unwrap

    def line_filter(self) -> s.LineFilter:
        tokens = self.tokens
        op = tokens.take()[1]
        patterns = []
        while True:
            if tokens.at("ident", "ip"):
                raise tokens.unsupported("ip() line filters")
            at = tokens.peek()[2]
            pattern = self.string()
            if op in ("|~", "!~"):
                self.check_regex(pattern, at)
            if op in ("|>", "!>"):
                _check_line_pattern(tokens, pattern, at)
            patterns.append(pattern)
            if not tokens.accept("ident", "or"):
                return s.LineFilter(op, tuple(patterns))

    def stage(self) -> s.Stage:
        tokens = self.tokens
        kind, name, at = tokens.peek()
        if kind == "ident":
            if name == "json":
                tokens.take()
                return s.JsonParser(self.extraction_params())
            if name == "logfmt":
                tokens.take()
                flags = set()
                while tokens.at("flag"):
                    flag = tokens.take()
                    if flag[1] not in ("--strict", "--keep-empty"):
                        raise tokens.error(f"syntax error: unknown logfmt flag {flag[1]}", flag[2])
                    flags.add(flag[1])
                return s.LogfmtParser(self.extraction_params(), "--strict" in flags, "--keep-empty" in flags)
            if name in ("regexp", "pattern"):
                tokens.take()
                at = tokens.peek()[2]
                pattern = self.string()
                (_check_named_regex if name == "regexp" else _check_pattern)(tokens, pattern, at)
                return s.RegexpParser(pattern) if name == "regexp" else s.PatternParser(pattern)
            if name == "unpack":
                tokens.take()
                return s.Unpack()
            if name == "decolorize":
                tokens.take()
                return s.Decolorize()
            if name == "line_format":
                tokens.take()
                at = tokens.peek()[2]
                template = self.string()
                _check_template(tokens, template, at)
                return s.LineFormat(template)
            if name == "label_format":
                tokens.take()
                return s.LabelFormat(self.label_format_items())
            if name in ("drop", "keep"):
                tokens.take()
                return s.DropKeep(name == "keep", self.drop_keep_items())
            if tokens.at("op", "(", 1):
                raise tokens.unsupported(f"pipeline stage {name}()", at)
        if kind == "ident" or (kind == "op" and name == "("):
            return s.LabelFilter(self.label_or())
        raise tokens.unexpected("a pipeline stage")

    def extraction_params(self) -> tuple[tuple[str, str], ...]:
        """``label="expression"`` or a bare ``label`` (the expression is the label), comma-separated."""
        tokens = self.tokens
        params: list[tuple[str, str]] = []
        while tokens.at("ident"):
            following = tokens.peek(1)
            if following[0] in ("end", "range") or (following[0] == "op" and following[1] in ("=", ",", "|", ")",
                                                                                              *LINE_FILTER_OPS)):
                label = self.ident()
                expression = self.string() if tokens.accept("op", "=") else label
                params.append((label, expression))
                if not tokens.accept("op", ","):
                    break
            else:
                break
        return tuple(params)

    def label_format_items(self) -> tuple[tuple[str, str | None, str | None], ...]:
        tokens = self.tokens
        items: list[tuple[str, str | None, str | None]] = []
        seen: set[str] = set()
        while True:
            at = tokens.peek()[2]
            dst = self.ident()
            tokens.expect("op", "=")
            if dst in seen:
                raise tokens.error(f"syntax error: label_format sets {dst} twice", at)
            seen.add(dst)
            if tokens.at("string"):
                template_at = tokens.peek()[2]
                template = self.string()
                _check_template(tokens, template, template_at)
                items.append((dst, None, template))
            else:
                items.append((dst, self.ident("a label name or a template"), None))
            if not tokens.accept("op", ","):
                return tuple(items)

    def drop_keep_items(self) -> tuple[tuple[str, str | None, str | None], ...]:
        tokens = self.tokens
        items: list[tuple[str, str | None, str | None]] = []
        while True:
            name = self.ident()
            if tokens.at("op") and tokens.peek()[1] in ("=", "!=", "=~", "!~"):
                op = tokens.take()[1]
                at = tokens.peek()[2]
                value = self.string()
                if op in ("=~", "!~"):
                    self.check_regex("^(?:" + value + ")$", at)
                items.append((name, op, value))
            else:
                items.append((name, None, None))
            if not tokens.accept("op", ","):
                return tuple(items)

    # -- label filter expressions -------------------------------------------------------------------
    def label_or(self) -> s.LabelExpr:
        left = self.label_and()
        while self.tokens.accept("ident", "or"):
            left = s.Or(left, self.label_and())
        return left

    def label_and(self) -> s.LabelExpr:
        tokens = self.tokens
        left = self.label_atom()
        while True:
            if tokens.accept("ident", "and") or tokens.accept("op", ",") or self._predicate_ahead():
                left = s.And(left, self.label_atom())
            else:
                return left

    def _predicate_ahead(self) -> bool:
        tokens = self.tokens
        if tokens.at("op", "("):
            return True
        if not tokens.at("ident") or tokens.peek()[1] in ("and", "or", "offset", "by", "without", "unwrap"):
            return False
        following = tokens.peek(1)
        return following[0] == "op" and following[1] in ("=", "!=", "=~", "!~", *COMPARISONS)

    def label_atom(self) -> s.LabelExpr:
        tokens = self.tokens
        if tokens.accept("op", "("):
            self.nested()
            inner = self.label_or()
            tokens.expect("op", ")")
            self.depth -= 1
            return inner
        name = self.ident()
        op_token = tokens.peek()
        if op_token[0] != "op" or op_token[1] not in ("=", "!=", "=~", "!~", *COMPARISONS):
            raise tokens.unexpected("a comparison operator")
        tokens.take()
        op = op_token[1]
        if tokens.at("ident", "ip"):
            raise tokens.unsupported("ip() label filters")
        if tokens.at("string"):
            if op not in ("=", "!=", "=~", "!~", "=="):
                raise tokens.error(f"syntax error: {op} compares numbers, durations or byte sizes, not text",
                                   op_token[2])
            at = tokens.peek()[2]
            value = self.string()
            if op in ("=~", "!~"):
                self.check_regex("^(?:" + value + ")$", at)
            return s.StringMatch(name, "=" if op == "==" else op, value)
        if op in ("=~", "!~"):
            raise tokens.unexpected("a string")
        at = tokens.peek()[2]
        negative = tokens.accept("op", "-") is not None
        token = tokens.expect("number", wanted="a string, number, duration or byte size")
        kind, value = _typed_value(token[1])
        if kind is None:
            raise tokens.error(f"syntax error: cannot read {token[1]!r} as a number, duration or byte size", at)
        return s.ValueCompare(name, "==" if op == "=" else op, kind, -value if negative else value)

    def unwrap(self) -> s.Unwrap:
        tokens = self.tokens
        name = self.ident("a label name")
        if tokens.accept("op", "("):
            if name not in ("duration", "duration_seconds", "bytes"):
                raise tokens.unsupported(f"unwrap conversion {name}()")
            label = self.ident()
            tokens.expect("op", ")")
            return s.Unwrap(label, "bytes" if name == "bytes" else "duration")
        return s.Unwrap(name)

    # -- metric expressions -------------------------------------------------------------------------
    def expression(self, min_precedence: int = 0) -> s.MetricExpr:
        self.nested()
        left = self.unary()
        while True:
            op = self._binary_op()
            if op is None or PRECEDENCE[op] < min_precedence:
                break
            at = self.tokens.peek()[2]
            self.tokens.take()
            return_bool = self.tokens.accept("ident", "bool") is not None
            if return_bool and op not in COMPARISONS:
                raise self.tokens.error("syntax error: bool modifier can only be used on comparison operators", at)
            matching = self.vector_matching()
            right = self.expression(PRECEDENCE[op] + (0 if op == "^" else 1))
            if op in ("and", "or", "unless") and (_is_scalar(left) or _is_scalar(right)):
                raise self.tokens.error(f"syntax error: set operator {op} not allowed with a scalar", at)
            if _is_scalar(left) and _is_scalar(right) and op in COMPARISONS and not return_bool:
                raise self.tokens.error("syntax error: comparisons between scalars must use the bool modifier", at)
            left = s.BinaryOp(op, left, right, return_bool, matching)
        self.depth -= 1
        return left

    def _binary_op(self) -> str | None:
        kind, value, _ = self.tokens.peek()
        if kind == "op" and value in PRECEDENCE:
            return value
        if kind == "ident" and value in ("and", "or", "unless"):
            return value
        return None

    def vector_matching(self) -> s.VectorMatching | None:
        tokens = self.tokens
        if not (tokens.at("ident", "on") or tokens.at("ident", "ignoring")):
            return None
        on = tokens.take()[1] == "on"
        labels = self.label_list()
        group, include = None, ()
        if tokens.at("ident", "group_left") or tokens.at("ident", "group_right"):
            group = tokens.take()[1].removeprefix("group_")
            include = self.label_list() if tokens.at("op", "(") else ()
        return s.VectorMatching(on, labels, group, include)

    def label_list(self) -> tuple[str, ...]:
        tokens = self.tokens
        tokens.expect("op", "(")
        labels: list[str] = []
        while not tokens.at("op", ")"):
            if labels:
                tokens.expect("op", ",", wanted="',' or ')'")
            labels.append(self.ident())
        tokens.expect("op", ")")
        return tuple(labels)

    def unary(self) -> s.MetricExpr:
        tokens = self.tokens
        if tokens.at("op", "-") or tokens.at("op", "+"):
            sign = tokens.take()[1]
            operand = self.expression(PRECEDENCE["^"])
            if sign == "+":
                return operand
            if isinstance(operand, s.Literal):
                return s.Literal(-operand.value)
            return s.BinaryOp("*", s.Literal(-1.0), operand)
        return self.primary()

    def primary(self) -> s.MetricExpr:
        tokens = self.tokens
        kind, name, at = tokens.peek()
        if kind == "number":
            self.number()  # validates
            return s.Literal(float(name))
        if kind == "op" and name == "(":
            tokens.take()
            inner = self.expression()
            tokens.expect("op", ")")
            return inner
        if kind == "op" and name == "{":
            raise tokens.error("syntax error: a log query cannot be used inside a metric query; wrap it in a "
                               "range aggregation such as count_over_time({…}[5m])", at)
        if kind != "ident":
            raise tokens.unexpected("a metric expression")
        if name in VECTOR_AGGREGATIONS:
            return self.vector_aggregation()
        if name in RANGE_FUNCTIONS or name in UNWRAP_FUNCTIONS:
            return self.range_aggregation()
        if name == "vector":
            tokens.take()
            tokens.expect("op", "(")
            value = self.number()
            tokens.expect("op", ")")
            return s.VectorLiteral(value)
        if name == "label_replace":
            return self.label_replace()
        if name in UNSUPPORTED_FUNCTIONS:
            raise tokens.unsupported(f"{name!r}", at)
        raise tokens.error(f"syntax error: unexpected {name!r}, expecting a metric expression "
                           f"({', '.join(RANGE_FUNCTIONS + UNWRAP_FUNCTIONS + VECTOR_AGGREGATIONS)}, vector, "
                           "label_replace)", at)

    def grouping(self) -> s.Grouping | None:
        tokens = self.tokens
        if not (tokens.at("ident", "by") or tokens.at("ident", "without")):
            return None
        without = tokens.take()[1] == "without"
        return s.Grouping(self.label_list(), without)

    def vector_aggregation(self) -> s.VectorAggregation:
        tokens = self.tokens
        op, at = tokens.take()[1:]
        before = self.grouping()
        tokens.expect("op", "(")
        param = None
        if op in PARAMETER_AGGREGATIONS:
            param = self.number("an integer")
            if param != int(param) or param < 0:
                raise tokens.error(f"syntax error: {op} takes a non-negative integer, not {param:g}", at)
            tokens.expect("op", ",")
        inner = self.expression()
        tokens.expect("op", ")")
        after = self.grouping()
        if before is not None and after is not None:
            raise tokens.error("syntax error: grouping given twice", at)
        grouping = before or after
        if op in ("sort", "sort_desc") and grouping is not None:
            raise tokens.error(f"syntax error: {op} does not take by or without", at)
        if _is_scalar(inner):
            raise tokens.error(f"syntax error: {op} expects a vector, not a scalar", at)
        return s.VectorAggregation(op, inner, grouping.labels if grouping else None,
                                   grouping.without if grouping else False, param)

    def range_aggregation(self) -> s.RangeAggregation:
        tokens = self.tokens
        function, at = tokens.take()[1:]
        tokens.expect("op", "(")
        param = None
        if function == "quantile_over_time":
            param = self.number()
            tokens.expect("op", ",")
        if tokens.at("op", "("):  # count_over_time(({…} |= "x")[5m]) is valid LogQL too
            tokens.take()
            selector = self.selector()
            stages, unwrap = self.pipeline(unwrap_allowed=True)
            tokens.expect("op", ")")
        else:
            selector = self.selector()
            stages, unwrap = self.pipeline(unwrap_allowed=True)
        duration = tokens.expect("range", wanted="a range [duration]")
        try:
            range_ns = parse_duration_ns(duration[1][1:-1].strip())
        except ValueError:
            raise tokens.error(f"syntax error: bad range {duration[1]}", duration[2]) from None
        if not 0 < range_ns <= MAX_RANGE_NS:
            raise tokens.error("syntax error: the range must be positive and at most 31 years", duration[2])
        offset_ns = 0
        if tokens.accept("ident", "offset"):
            offset_at = tokens.peek()[2]
            text = tokens.expect("number", wanted="a duration")[1]
            try:
                offset_ns = parse_duration_ns(text)
            except ValueError:
                raise tokens.error(f"syntax error: bad offset {text}", offset_at) from None
            if offset_ns > MAX_RANGE_NS:
                raise tokens.error("syntax error: the offset must be at most 31 years", offset_at)
        if stages or unwrap is None:  # Loki also allows the pipeline after the range
            more, late_unwrap = self.pipeline(unwrap_allowed=unwrap is None)
            stages = (*stages, *more)
            unwrap = unwrap or late_unwrap
        tokens.expect("op", ")")
        grouping = self.grouping()
        self._check_range(function, unwrap, grouping, at)
        return s.RangeAggregation(function, s.LogSelector(selector.matchers, stages, selector.never), range_ns,
                                  offset_ns, unwrap, param, grouping)

    def _check_range(self, function: str, unwrap: s.Unwrap | None, grouping: s.Grouping | None, at: int) -> None:
        tokens = self.tokens
        if function in UNWRAP_FUNCTIONS and unwrap is None:
            raise tokens.error(f"syntax error: {function} requires an unwrap expression (| unwrap label)", at)
        if unwrap is not None and function not in (*UNWRAP_FUNCTIONS, "rate", "absent_over_time"):
            raise tokens.error(f"syntax error: invalid aggregation {function} with unwrap", at)
        if grouping is not None and (unwrap is None or function not in GROUPABLE_RANGE):
            raise tokens.error(f"syntax error: grouping not allowed for {function} aggregation", at)

    def label_replace(self) -> s.LabelReplace:
        tokens = self.tokens
        tokens.take()
        tokens.expect("op", "(")
        inner = self.expression()
        values = []
        for _ in range(4):
            tokens.expect("op", ",")
            at = tokens.peek()[2]
            values.append((self.string(), at))
        tokens.expect("op", ")")
        (dst, dst_at), (replacement, _), (src, _), (regex, regex_at) = values
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", dst):
            raise tokens.error(f"invalid destination label name in label_replace(): {dst}", dst_at)
        self.check_regex("^(?:" + regex + ")$", regex_at)
        return s.LabelReplace(inner, dst, replacement, src, regex)


def _is_scalar(expr: s.MetricExpr) -> bool:
    if isinstance(expr, s.Literal):
        return True
    return isinstance(expr, s.BinaryOp) and _is_scalar(expr.left) and _is_scalar(expr.right)


def _typed_value(text: str) -> tuple[str | None, float]:
    """A label filter literal: a number, a duration (seconds) or a byte size."""
    match = _UNIT_SUFFIX.match(text)
    if match is None:
        return None, 0.0
    if match.group("unit") is None:
        return "number", float(text)
    try:
        return "duration", query_duration_seconds(text)
    except ValueError:
        pass
    try:
        return "bytes", bytes_value(text)
    except ValueError:
        return None, 0.0


def _matches_absent(op: str, value: str) -> bool:
    """Whether the matcher accepts a label that is not there (its value is "")."""
    if op in ("=", "!="):
        return (value == "") == (op == "=")
    found = re.fullmatch(value, "") is not None if _python_regex_ok(value) else False
    return found == (op == "=~")


def _python_regex_ok(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


def _check_named_regex(tokens: Tokens, pattern: str, at: int) -> None:
    from .extract import compile_regexp

    try:
        compile_regexp(pattern)
    except ValueError as exc:
        raise tokens.error(f"invalid regexp parser: {exc}", at) from None


def _check_pattern(tokens: Tokens, pattern: str, at: int) -> None:
    from .extract import LinePattern

    try:
        LinePattern(pattern, parser=True)
    except ValueError as exc:
        raise tokens.error(f"invalid pattern parser: {exc}", at) from None


def _check_line_pattern(tokens: Tokens, pattern: str, at: int) -> None:
    from .extract import LinePattern

    try:
        LinePattern(pattern, parser=False)
    except ValueError as exc:
        raise tokens.error(f"invalid pattern filter: {exc}", at) from None


def _check_template(tokens: Tokens, template: str, at: int) -> None:
    from .template import Template, TemplateError

    try:
        Template(template)
    except TemplateError as exc:
        raise tokens.error(f"invalid template: {exc}", at) from None


def parse(text: str) -> s.Query:
    """The tree of a LogQL query; :class:`LogQLError` (Loki's message) when it is outside what is supported."""
    parser = _Parser(text)
    tokens = parser.tokens
    if tokens.peek()[0] == "end":
        raise tokens.error("syntax error: unexpected end of input, expecting a query")
    query: s.Query
    if tokens.at("op", "{"):
        selector = parser.selector()
        stages, _ = parser.pipeline()
        query = s.LogSelector(selector.matchers, stages, selector.never)
    else:
        query = parser.expression()
    if tokens.peek()[0] != "end":
        raise tokens.unexpected("end of input")
    return query


def parse_selector(text: str, pipeline: bool = True) -> s.LogSelector:
    """A log query (what ``match[]`` and the ``query`` of the label, series and drilldown endpoints
    take); with ``pipeline=False`` only matchers are allowed (Loki: volume, index stats)."""
    query = parse(text)
    if not isinstance(query, s.LogSelector):
        raise LogQLError("parse error at line 1, col 1: a stream selector was expected, e.g. {job=\"x\"}")
    if not pipeline and query.stages:
        raise LogQLError("only label matchers are supported")
    return query
