"""The compiler of a :class:`~.filters.QuerySpec` to Arrow: a dataset expression pushed down to Parquet
statistics and scans, and the text condition a search evaluates on arrays directly."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from ..errors import UserError
from ..record import ANNOTATION_FORMAT, ns_to_ts
from .filter_attrs import parse_attr
from .globs import glob_to_re2, split_literal

if TYPE_CHECKING:
    import pyarrow.dataset as ds

    from .filters import QuerySpec

# The columns each spec field's filter reads: every field build_expression uses must be listed here.
FILTER_COLUMNS: dict[str, tuple[str, ...]] = {
    "start_ns": ("ts",), "end_ns": ("ts",), "levels": ("level",), "hosts": ("host",), "loggers": ("logger",),
    "ips": ("ip",), "jobs": ("job",), "trace_ids": ("trace_id",), "pids": ("pid",), "ranks": ("rank",),
    "step_min": ("step",), "step_max": ("step",), "contains": ("msg", "exc"), "regex": ("msg", "exc"),
    "attrs": ("attrs",), "line_filters": ("msg", "exc"), "annotations": ("format",),
    "label_matchers": (),  # the columns are the matchers' own: QuerySpec.filter_columns adds them
}

# Loki-style label matchers (``label_matchers``): the columns they may name, their operators, and the
# operators of ``line_filters`` (over the message and the exception text, like --contains/--regex).
MATCHER_COLUMNS = ("job", "host", "rank", "local_rank", "role", "level", "format", "trace_id", "service_name",
                   "detected_level")
MATCHER_OPS = ("=", "!=", "=~", "!~")
# Labels derived from a column, as Loki derives them: ``service_name`` is the record's job
# (``unknown_service`` without one, Loki's default); ``detected_level`` is the level spelled the way
# Loki's level detection writes it.
SERVICE_NAME_DEFAULT = "unknown_service"
DETECTED_LEVELS = {"DEBUG": "debug", "INFO": "info", "WARNING": "warn", "ERROR": "error", "CRITICAL": "critical",
                   "UNKNOWN": "unknown"}
DERIVED_COLUMNS = {"service_name": "job", "detected_level": "level"}
# More matchers than this in one query is abuse, not a selection (issue 40: 5,000 of them took 41 s).
MAX_LABEL_MATCHERS = 256
LINE_FILTER_OPS = ("|=", "!=", "|~", "!~")
_INT_COLUMNS = {"rank": 31, "local_rank": 31, "pid": 31, "step": 63}  # integer columns matched by their decimal text
# The columns the identity join may fill after a record was stored (ranklog.source_identity.LENT):
# filters on them are applied to the joined records (ranklog.query.identity_join).
IDENTITY_COLUMNS = ("rank", "local_rank", "role", "pid", "host")


def _isin_or_glob(name: str, values: tuple[str, ...]) -> ds.Expression:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    literal = {v: split_literal(v) for v in values}
    exact = [name_ for name_ in literal.values() if name_ is not None]
    parts = []
    if exact:
        parts.append(ds.field(name).isin(pa.array(exact, pa.string())))
    for pattern in (v for v, name_ in literal.items() if name_ is None):
        parts.append(pc.match_substring_regex(ds.field(name), glob_to_re2(pattern)))
    return _or(parts)


def _or(parts: list) -> ds.Expression:
    out = parts[0]
    for part in parts[1:]:
        out = out | part
    return out


def build_expression(spec: QuerySpec, identity_sources: tuple[str, ...] = ()) -> ds.Expression | None:
    """The spec's filter. With `identity_sources` (:mod:`.identity_join`), the records of those
    sources pass the filters on identity columns whatever they hold: the join decides afterwards."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    from ..record import TS_TYPE

    parts: list[ds.Expression] = []
    # ts is stored in microseconds: rounding the bounds up keeps `>= start` and `< end` exact.
    if spec.start_ns is not None:
        parts.append(ds.field("ts") >= pa.scalar(ns_to_ts(spec.start_ns, ceil=True), TS_TYPE))
    if spec.end_ns is not None:
        parts.append(ds.field("ts") < pa.scalar(ns_to_ts(spec.end_ns, ceil=True), TS_TYPE))
    if spec.levels:
        parts.append(ds.field("level").isin(pa.array(list(spec.levels), pa.string())))
    for name, values in (("logger", spec.loggers), ("job", spec.jobs)):
        if values:
            parts.append(_isin_or_glob(name, values))
    for name, values in (("ip", spec.ips), ("trace_id", spec.trace_ids)):
        if values:
            parts.append(ds.field(name).isin(pa.array(list(values), pa.string())))
    if spec.step_min is not None:
        parts.append(ds.field("step") >= pa.scalar(spec.step_min, pa.int64()))
    if spec.step_max is not None:
        parts.append(ds.field("step") <= pa.scalar(spec.step_max, pa.int64()))
    text = text_condition(spec, ds.field("msg"), ds.field("exc"))
    if text is not None:
        parts.append(text)
    parts += [matcher_expression(name, op, value) for name, op, value in spec.label_matchers
              if name not in IDENTITY_COLUMNS]
    if not spec.annotations and not any(name == "format" for name, _, _ in spec.label_matchers):
        # triage's verdict records are not logs (they would count as the errors they describe)
        parts.append(ds.field("format") != pa.scalar(ANNOTATION_FORMAT, pa.string()))
    parts += [line_filter_condition(op, pattern, ds.field("msg"), ds.field("exc")) for op, pattern in spec.line_filters]
    for item in spec.attrs:
        key, _ = parse_attr(item)
        top = key.split(".")[0]
        parts.append(pc.match_substring(ds.field("attrs"), json.dumps(top)))
    identity = identity_expression(spec)
    if identity is not None:
        if identity_sources:
            identity = identity | ds.field("source_id").isin(pa.array(list(identity_sources), pa.string()))
        parts.append(identity)
    return and_all(parts)


def identity_expression(spec: QuerySpec) -> ds.Expression | None:
    """The spec's filters on :data:`IDENTITY_COLUMNS` (host, pid, rank, and label matchers on them)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    parts: list[ds.Expression] = []
    if spec.hosts:
        parts.append(_isin_or_glob("host", spec.hosts))
    if spec.pids:
        parts.append(ds.field("pid").isin(pa.array(list(spec.pids), pa.int32())))
    if spec.ranks:
        parts.append(ds.field("rank").isin(pa.array(list(spec.ranks), pa.int32())))
    parts += [matcher_expression(name, op, value) for name, op, value in spec.label_matchers
              if name in IDENTITY_COLUMNS]
    return and_all(parts)


def and_all(parts: list) -> ds.Expression | None:
    """The conjunction of `parts` as a balanced tree (a left-deep chain of thousands is slow to build
    and to evaluate)."""
    if not parts:
        return None
    while len(parts) > 1:
        parts = [parts[i] & parts[i + 1] if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


def _label_text(name: str) -> ds.Expression:
    """The column as Loki sees a label: text, and "" where the record has no value."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    field = ds.field(name).cast(pa.string()) if name in _INT_COLUMNS else ds.field(name)
    return pc.coalesce(field, pa.scalar("", pa.string()))


def _derived_expression(name: str, op: str, value: str) -> ds.Expression:
    """A matcher on ``service_name`` or ``detected_level`` as an expression on the column it derives from."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    positive = "=" if op in ("=", "!=") else "=~"
    if name == "detected_level":  # a closed set: the levels whose spelling the matcher accepts
        accepts = [level for level, spelled in DETECTED_LEVELS.items()
                   if _python_match(positive, value, spelled)]
        matched = ds.field("level").isin(pa.array(accepts, pa.string())) if accepts else ds.scalar(False)
        return matched if op == positive else pc.invert(pc.coalesce(matched, pa.scalar(False)))
    text = pc.coalesce(ds.field("job"), pa.scalar(SERVICE_NAME_DEFAULT, pa.string()))
    if positive == "=":
        matched = text == pa.scalar(value, pa.string())
    else:
        literals = literal_alternatives(value)
        matched = (text.isin(pa.array(literals, pa.string())) if literals is not None
                   else pc.match_substring_regex(text, "^(?:" + value + ")$"))
    return matched if op == positive else pc.invert(matched)


def _python_match(op: str, value: str, text: str) -> bool:
    if op == "=":
        return text == value
    try:
        return re.fullmatch(value, text) is not None
    except re.error:  # RE2 syntax Python lacks: decide with RE2 itself
        import pyarrow as pa
        import pyarrow.compute as pc

        return bool(pc.match_substring_regex(pa.array([text]), "^(?:" + value + ")$")[0].as_py())


def matcher_expression(name: str, op: str, value: str) -> ds.Expression:
    """A Loki label matcher on a record column. A missing value is the empty string (Loki's rule);
    ``=~``/``!~`` are fully anchored RE2; ``level`` equality ignores case (``error`` = ``ERROR``)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    if name in DERIVED_COLUMNS:
        return _derived_expression(name, op, value)
    literals = literal_alternatives(value) if op in ("=~", "!~") else None
    if literals is not None:  # level=~"ERROR|CRITICAL": a set lookup Parquet statistics can prune with
        matched = _or([matcher_expression(name, "=", literal) for literal in literals])
        return matched if op == "=~" else pc.invert(pc.coalesce(matched, pa.scalar(False)))
    if op in ("=~", "!~"):
        anchored = "^(?:" + value + ")$"
        matched = pc.match_substring_regex(_label_text(name), anchored, ignore_case=name == "level")
        return matched if op == "=~" else pc.invert(matched)
    field = ds.field(name)
    if value == "":
        equal = field.is_null() if name in _INT_COLUMNS else field.is_null() | (field == pa.scalar("", pa.string()))
    elif name in _INT_COLUMNS:
        # the label value is the decimal text: "01" or "1.0" is not rank 1
        bits = _INT_COLUMNS[name]
        valid = re.fullmatch(r"-?[1-9]\d{0,18}|0", value) is not None and -(1 << bits) <= int(value) < (1 << bits)
        equal = field == pa.scalar(int(value), pa.int32() if bits == 31 else pa.int64()) if valid else ds.scalar(False)
    else:
        equal = field == pa.scalar(value.upper() if name == "level" else value, pa.string())
    if op == "=":
        return equal
    return pc.invert(pc.coalesce(equal, pa.scalar(False))) if value != "" else pc.invert(equal)


def literal_alternatives(pattern: str) -> list[str] | None:
    """``a|b|c`` (optionally in one group) as its literal alternatives, or None when it is a real regex."""
    inner = pattern[1:-1] if pattern.startswith("(") and pattern.endswith(")") and pattern.count("(") == 1 else pattern
    parts = inner.split("|")
    if not inner or any(re.fullmatch(r"[\w:\-/@,=# ]+", part) is None for part in parts):
        return None
    return parts


def _in_text(function: Any, pattern: str, msg: Any, exc: Any, ignore_case: bool) -> Any:
    """`pattern` found in `msg`, or in `exc` where it is set: never null."""
    import pyarrow.compute as pc

    in_msg = function(msg, pattern, ignore_case=ignore_case)
    in_exc = function(exc, pattern, ignore_case=ignore_case)
    return pc.or_kleene(in_msg, pc.and_kleene(pc.is_valid(exc), in_exc))


def line_filter_condition(op: str, pattern: str, msg: Any, exc: Any) -> Any:
    """A Loki line filter (``|=`` ``!=`` ``|~`` ``!~``) over the message and the exception text."""
    import pyarrow.compute as pc

    function = pc.match_substring if op in ("|=", "!=") else pc.match_substring_regex
    found = _in_text(function, pattern, msg, exc, ignore_case=False)
    return found if op in ("|=", "|~") else pc.invert(found)


def text_condition(spec: QuerySpec, msg: Any, exc: Any) -> Any:
    """The ``--contains`` / ``--regex`` condition on `msg` and `exc`, or None when there is none.

    Given dataset fields it is an expression (pushed into scans); given arrays, the boolean mask
    itself — one definition, so a search that evaluates it directly answers exactly like a scan.
    """
    import pyarrow.compute as pc

    parts = []
    for function, pattern in ((pc.match_substring, spec.contains), (pc.match_substring_regex, spec.regex)):
        if pattern is not None:
            parts.append(_in_text(function, pattern, msg, exc, spec.ignore_case))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else pc.and_kleene(parts[0], parts[1])


def check_regex(pattern: str, what: str = "--regex") -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        pc.match_substring_regex(pa.array([""]), pattern)
    except (pa.ArrowInvalid, ValueError) as exc:
        raise UserError(f"bad {what} {pattern!r}: {str(exc).splitlines()[0]}") from None


def check_matchers(label_matchers: tuple[tuple[str, str, str], ...], line_filters: tuple[tuple[str, str], ...]) -> None:
    """UserError for an unknown column or operator, a bad regular expression, or too many matchers."""
    if len(label_matchers) > MAX_LABEL_MATCHERS:
        raise UserError(f"label_matchers: {len(label_matchers)} matchers, more than the limit of {MAX_LABEL_MATCHERS}")
    for name, op, value in label_matchers:
        if name not in MATCHER_COLUMNS:
            raise UserError(f"label_matchers: unknown label {name!r} (one of {', '.join(MATCHER_COLUMNS)})")
        if op not in MATCHER_OPS:
            raise UserError(f"label_matchers: unknown operator {op!r} (one of {' '.join(MATCHER_OPS)})")
        if op in ("=~", "!~"):
            check_regex("^(?:" + value + ")$", f"label regex for {name}")
    for op, pattern in line_filters:
        if op not in LINE_FILTER_OPS:
            raise UserError(f"line_filters: unknown operator {op!r} (one of {' '.join(LINE_FILTER_OPS)})")
        if op in ("|~", "!~"):
            check_regex(pattern, "line filter regex")
