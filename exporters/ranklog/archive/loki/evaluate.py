"""LogQL evaluated by the query engine: a selector becomes a :class:`QuerySpec` (so partition pruning,
row-group statistics, the trace and severe-rows indexes all apply), and the engine's batches become
Loki streams, series and label sets.

What a Loki *line* is here: the record's ``msg``, followed by a newline and ``exc`` when the record
carries a traceback — the text ``ranklog query --regex`` searches, so line filters and the CLI agree.
A *stream* is one combination of the :data:`~ranklog.query.logql.STREAM_LABELS` values a record has (rank and
local_rank as decimal text; a null is no label). Timestamps leave as nanosecond strings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...query import engine
from ...query.logql import (
    STREAM_LABELS,
    LogSelector,
    MetricExpr,
    RangeAggregation,
    VectorAggregation,
    range_of,
)
from ...query.logql_spec import to_spec
from ...record import ts_ns

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

LINE_COLUMNS = ["ts", "msg", "exc", *STREAM_LABELS]
Labels = tuple[tuple[str, str], ...]


def ns_column(table: pa.Table) -> np.ndarray:
    """The ``ts`` column as int64 nanoseconds, whatever unit the archive stores."""
    return ts_ns(table.column("ts"))


def _label_strings(table: pa.Table, names: list[str] | tuple[str, ...]) -> list[list[str | None]]:
    import pyarrow as pa

    out = []
    for name in names:
        column = table.column(name)
        if not pa.types.is_string(column.type):
            column = column.cast(pa.string())
        out.append(column.to_pylist())
    return out


def label_rows(table: pa.Table, names: list[str] | tuple[str, ...]) -> Iterator[Labels]:
    """Each row's labels: (name, value) pairs for the non-empty values, in `names` order."""
    if not names:
        yield from (() for _ in range(table.num_rows))
        return
    columns = _label_strings(table, names)
    for values in zip(*columns, strict=True):
        yield tuple((name, value) for name, value in zip(names, values, strict=True) if value)


def _lines(table: pa.Table) -> list[str]:
    import pyarrow.compute as pc

    with_exc = pc.binary_join_element_wise(table.column("msg"), table.column("exc"), "\n")
    return pc.coalesce(with_exc, table.column("msg")).to_pylist()


@dataclass
class Streams:
    streams: list[dict[str, Any]]
    entries: int


def log_streams(source: Any, selector: LogSelector, start_ns: int, end_ns: int, limit: int,
                forward: bool) -> Streams:
    """The newest (backward) or oldest (forward) `limit` matching records, grouped into streams."""
    if selector.never or limit == 0:
        return Streams([], 0)
    spec = to_spec(selector, start_ns, end_ns, order=("ts",) if forward else ("-ts",), limit=limit)
    table = engine.read(source, spec, LINE_COLUMNS)
    times = ns_column(table)
    lines = _lines(table)
    grouped: dict[Labels, list[list[str]]] = {}
    for labels, ts, line in zip(label_rows(table, STREAM_LABELS), times, lines, strict=True):
        grouped.setdefault(labels, []).append([str(int(ts)), line])
    streams = [{"stream": dict(labels), "values": values} for labels, values in grouped.items()]
    return Streams(streams, table.num_rows)


# -- label sets -------------------------------------------------------------------------------------
def distinct_label_sets(source: Any, selector: LogSelector, start_ns: int, end_ns: int,
                        names: tuple[str, ...] = STREAM_LABELS) -> set[Labels]:
    """The distinct (non-empty) label sets over `names` of the matching records (the series API)."""
    if selector.never:
        return set()
    spec = dataclasses.replace(to_spec(selector, start_ns, end_ns), order=())
    found: set[Labels] = set()
    for batch in engine.scan(source, spec, list(names)):
        import pyarrow as pa

        unique = pa.Table.from_batches([batch]).group_by(list(names), use_threads=False).aggregate([])
        found.update(label_rows(unique, names))
    return found


# -- metric queries ---------------------------------------------------------------------------------
@dataclass
class Series:
    labels: Labels
    times: np.ndarray  # int64 ns of the points present
    values: np.ndarray  # float64


def _weights_column(table: pa.Table) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc

    size = pc.binary_length(table.column("msg").cast(pa.binary()))
    exc = pc.add(pc.binary_length(table.column("exc").cast(pa.binary())), 1)
    return pc.add(size, pc.coalesce(exc, 0)).cast(pa.float64()).to_numpy(zero_copy_only=False)


def _range_series(source: Any, expr: RangeAggregation, steps: np.ndarray, group_labels: tuple[str, ...]) -> list[Series]:
    """`expr` evaluated at each of `steps` (ns) per stream: Loki's window (t - range, t]."""
    import numpy as np
    import pyarrow as pa

    selector = expr.selector
    if selector.never or not len(steps):
        return []
    by_bytes = expr.function in ("bytes_over_time", "bytes_rate")
    columns = ["ts", *group_labels, *(("msg", "exc") if by_bytes else ())]
    spec = dataclasses.replace(to_spec(selector, int(steps[0]) - expr.range_ns + 1, int(steps[-1]) + 1), order=())
    table = engine.read(source, spec, columns)
    if table.num_rows == 0:
        return []
    keyed = table.select(list(group_labels)).append_column("__ts", pa.array(ns_column(table), pa.int64()))
    keyed = keyed.append_column("__w", pa.array(_weights_column(table) if by_bytes else np.ones(table.num_rows)))
    if group_labels:
        groups = keyed.group_by(list(group_labels), use_threads=False).aggregate([("__ts", "list"), ("__w", "list")])
    else:  # one series of everything
        groups = pa.table({"__ts_list": [keyed.column("__ts").to_pylist()], "__w_list": [keyed.column("__w").to_pylist()]})
    per_second = expr.function in ("rate", "bytes_rate")
    out = []
    for labels, times, weights in zip(label_rows(groups, group_labels), groups.column("__ts_list").to_pylist(),
                                      groups.column("__w_list").to_pylist(), strict=True):
        order = np.argsort(np.asarray(times, np.int64), kind="stable")
        ts = np.asarray(times, np.int64)[order]
        cumulative = np.concatenate([[0.0], np.cumsum(np.asarray(weights, np.float64)[order])])
        high = np.searchsorted(ts, steps, side="right")
        low = np.searchsorted(ts, steps - expr.range_ns, side="right")
        present = high > low
        values = cumulative[high] - cumulative[low]
        if per_second:
            values = values / (expr.range_ns / 1e9)
        out.append(Series(labels, steps[present], values[present]))
    return out


def _output_labels(labels: Labels, grouping: tuple[str, ...] | None, without: bool) -> Labels:
    if grouping is None:
        return ()
    if without:
        return tuple(item for item in labels if item[0] not in grouping)
    return tuple(item for item in labels if item[0] in grouping)


def _aggregate(op: str, series: list[Series], steps: np.ndarray, grouping: tuple[str, ...] | None,
               without: bool) -> list[Series]:
    import numpy as np

    index = {int(t): i for i, t in enumerate(steps)}
    groups: dict[Labels, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    for one in series:
        key = _output_labels(one.labels, grouping, without)
        if key not in groups:
            size = len(steps)
            groups[key] = (np.zeros(size), np.zeros(size), np.full(size, np.inf), np.full(size, -np.inf))
        total, count, low, high = groups[key]
        at = np.fromiter((index[int(t)] for t in one.times), np.int64, len(one.times))
        np.add.at(total, at, one.values)
        np.add.at(count, at, 1)
        np.minimum.at(low, at, one.values)
        np.maximum.at(high, at, one.values)
    out = []
    for key, (total, count, low, high) in groups.items():
        present = count > 0
        values = {"sum": total, "count": count, "min": low, "max": high,
                  "avg": np.divide(total, np.maximum(count, 1))}[op]
        out.append(Series(key, steps[present], values[present]))
    return out


def _needed_labels(expr: MetricExpr) -> tuple[str, ...]:
    """The stream labels the evaluation must read: all of them, except for ``sum [by (…)]`` straight
    over a range aggregation, which needs only its grouping labels (summing per-stream counts, bytes
    or rates equals computing them over the union of the streams)."""
    if (isinstance(expr, VectorAggregation) and expr.op == "sum" and not expr.without
            and isinstance(expr.inner, RangeAggregation)):
        return tuple(label for label in STREAM_LABELS if label in (expr.grouping or ()))
    return STREAM_LABELS


def evaluate_metric(source: Any, expr: MetricExpr, steps: np.ndarray) -> list[Series]:
    """The series of a metric query at `steps` (int64 ns, ascending)."""
    needed = _needed_labels(expr)
    if needed != STREAM_LABELS:
        # sum by (…) (f(...)): evaluating per group directly equals summing per-stream results.
        assert isinstance(expr, VectorAggregation)
        inner = _range_series(source, range_of(expr), steps, needed)
        return _aggregate("sum", inner, steps, expr.grouping, False)
    return _evaluate(source, expr, steps)


def _evaluate(source: Any, expr: MetricExpr, steps: np.ndarray) -> list[Series]:
    if isinstance(expr, RangeAggregation):
        return _range_series(source, expr, steps, STREAM_LABELS)
    return _aggregate(expr.op, _evaluate(source, expr.inner, steps), steps, expr.grouping, expr.without)
