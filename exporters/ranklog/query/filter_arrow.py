"""The compiler of a :class:`~.filters.QuerySpec` to Arrow: a dataset expression pushed down to Parquet
statistics and scans, and the text condition a search evaluates on arrays directly."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..errors import UserError
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
    "attrs": ("attrs",),
}


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


def build_expression(spec: QuerySpec) -> ds.Expression | None:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    ts_type = pa.timestamp("ns", tz="UTC")
    parts: list[ds.Expression] = []
    if spec.start_ns is not None:
        parts.append(ds.field("ts") >= pa.scalar(spec.start_ns, ts_type))
    if spec.end_ns is not None:
        parts.append(ds.field("ts") < pa.scalar(spec.end_ns, ts_type))
    if spec.levels:
        parts.append(ds.field("level").isin(pa.array(list(spec.levels), pa.string())))
    for name, values in (("host", spec.hosts), ("logger", spec.loggers)):
        if values:
            parts.append(_isin_or_glob(name, values))
    for name, values in (("ip", spec.ips), ("job", spec.jobs), ("trace_id", spec.trace_ids)):
        if values:
            parts.append(ds.field(name).isin(pa.array(list(values), pa.string())))
    if spec.pids:
        parts.append(ds.field("pid").isin(pa.array(list(spec.pids), pa.int32())))
    if spec.ranks:
        parts.append(ds.field("rank").isin(pa.array(list(spec.ranks), pa.int32())))
    if spec.step_min is not None:
        parts.append(ds.field("step") >= pa.scalar(spec.step_min, pa.int64()))
    if spec.step_max is not None:
        parts.append(ds.field("step") <= pa.scalar(spec.step_max, pa.int64()))
    text = text_condition(spec, ds.field("msg"), ds.field("exc"))
    if text is not None:
        parts.append(text)
    for item in spec.attrs:
        key, _ = parse_attr(item)
        top = key.split(".")[0]
        parts.append(pc.match_substring(ds.field("attrs"), json.dumps(top)))
    if not parts:
        return None
    out = parts[0]
    for part in parts[1:]:
        out = out & part
    return out


def text_condition(spec: QuerySpec, msg: Any, exc: Any) -> Any:
    """The ``--contains`` / ``--regex`` condition on `msg` and `exc`, or None when there is none.

    Given dataset fields it is an expression (pushed into scans); given arrays, the boolean mask
    itself — one definition, so a search that evaluates it directly answers exactly like a scan.
    """
    import pyarrow.compute as pc

    parts = []
    for function, pattern in ((pc.match_substring, spec.contains), (pc.match_substring_regex, spec.regex)):
        if pattern is not None:
            in_msg = function(msg, pattern, ignore_case=spec.ignore_case)
            in_exc = function(exc, pattern, ignore_case=spec.ignore_case)
            parts.append(pc.or_kleene(in_msg, pc.and_kleene(pc.is_valid(exc), in_exc)))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else pc.and_kleene(parts[0], parts[1])


def check_regex(pattern: str) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        pc.match_substring_regex(pa.array([""]), pattern)
    except (pa.ArrowInvalid, ValueError) as exc:
        raise UserError(f"bad --regex {pattern!r}: {str(exc).splitlines()[0]}") from None
