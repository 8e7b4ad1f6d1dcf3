"""Metric queries evaluated at a list of steps: range aggregations (:mod:`.samples`), vector
aggregations, ``label_replace``, ``vector()``, literals and binary operators with PromQL's semantics
(Loki reuses Prometheus' engine rules): one-to-one matching on all labels, ``on``/``ignoring``,
``group_left``/``group_right``; comparisons filter unless ``bool``; ``and``/``or``/``unless`` per
step; a vector and a scalar combine per series.

A value is a :class:`Matrix` (series × steps, NaN where a series has no sample) or a :class:`Scalar`
(one value per step). The answer's series count is capped by Loki's ``max_query_series``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...query import budget
from ...query.logql import syntax as s
from .samples import ADDITIVE, Grouping, Labels, evaluate_range

if TYPE_CHECKING:
    import numpy as np


@dataclass
class Matrix:
    labels: list[Labels]
    values: np.ndarray  # len(labels) × steps


@dataclass
class Scalar:
    values: np.ndarray  # one per step


Value = Matrix | Scalar


class EvaluationError(budget.QueryAborted):
    """A query Loki would refuse while evaluating it (e.g. duplicate series after label_replace)."""


def evaluate(source: Any, expr: s.MetricExpr, steps: np.ndarray) -> Value:
    """The value of a metric query at `steps` (int64 ns, ascending); the result's series are capped."""
    value = _eval(source, expr, steps, root=True)
    if isinstance(value, Matrix):
        running = budget.current()
        if running is not None:
            running.check_series(len(value.labels))
    return value


def _eval(source: Any, expr: s.MetricExpr, steps: np.ndarray, root: bool = False) -> Value:
    import numpy as np

    budget.check()
    if isinstance(expr, s.Literal):
        return Scalar(np.full(len(steps), expr.value))
    if isinstance(expr, s.VectorLiteral):
        return Matrix([()], np.full((1, len(steps)), expr.value))
    if isinstance(expr, s.RangeAggregation):
        result = evaluate_range(source, expr, steps, None, cap_series=root)
        return Matrix(result.labels, result.values)
    if isinstance(expr, s.VectorAggregation):
        return _vector_aggregation(source, expr, steps, root)
    if isinstance(expr, s.LabelReplace):
        inner = _eval(source, expr.inner, steps)
        assert isinstance(inner, Matrix)
        return _label_replace(inner, expr)
    return _binary(expr.op, _eval(source, expr.left, steps), _eval(source, expr.right, steps), expr.return_bool,
                   expr.matching)


# -- aggregation ----------------------------------------------------------------------------------------------
def _group_key(labels: Labels, grouping: tuple[str, ...] | None, without: bool) -> Labels:
    if grouping is None:
        return ()
    if without:
        return tuple(item for item in labels if item[0] not in grouping)
    return tuple(item for item in labels if item[0] in grouping)


def _vector_aggregation(source: Any, expr: s.VectorAggregation, steps: np.ndarray, root: bool) -> Matrix:

    inner_expr = expr.inner
    if expr.op == "sum" and isinstance(inner_expr, s.RangeAggregation) and (
            inner_expr.function in ADDITIVE or (inner_expr.function == "rate" and inner_expr.unwrap is not None)):
        # sum by (…) over an additive range aggregation: group the samples directly (exact).
        pushed = Grouping(expr.grouping or (), expr.without) if expr.grouping is not None else Grouping(())
        result = evaluate_range(source, inner_expr, steps, pushed, cap_series=root)
        return Matrix(result.labels, result.values)
    inner = _eval(source, inner_expr, steps)
    if isinstance(inner, Scalar):
        raise EvaluationError(f"{expr.op} expects a vector, not a scalar")
    return aggregate(expr.op, inner, expr.grouping, expr.without, expr.param)


def aggregate(op: str, inner: Matrix, grouping: tuple[str, ...] | None, without: bool, param: float | None) -> Matrix:
    import numpy as np

    if op in ("sort", "sort_desc"):
        return inner
    groups: dict[Labels, list[int]] = {}
    for row, labels in enumerate(inner.labels):
        groups.setdefault(_group_key(labels, grouping, without), []).append(row)
    if op in ("topk", "bottomk"):
        return _top(inner, groups, int(param or 0), op == "topk")
    labels_out, rows_out = [], []
    with np.errstate(invalid="ignore", divide="ignore"):
        for key, rows in groups.items():
            block = inner.values[rows]
            present = ~np.isnan(block)
            count = present.sum(axis=0)
            if op == "sum":
                value = np.nansum(block, axis=0)
            elif op == "count":
                value = count.astype(float)
            elif op == "avg":
                value = np.nansum(block, axis=0) / count
            elif op == "min":
                value = np.nanmin(np.where(present, block, np.inf), axis=0)
            elif op == "max":
                value = np.nanmax(np.where(present, block, -np.inf), axis=0)
            else:  # stddev, stdvar (population)
                mean = np.nansum(block, axis=0) / count
                variance = np.nansum(np.where(present, (block - mean) ** 2, 0.0), axis=0) / count
                value = np.sqrt(variance) if op == "stddev" else variance
            labels_out.append(key)
            rows_out.append(np.where(count > 0, value, np.nan))
    return Matrix(labels_out, np.vstack(rows_out) if rows_out else np.empty((0, inner.values.shape[1])))


def _top(inner: Matrix, groups: dict[Labels, list[int]], k: int, largest: bool) -> Matrix:
    import numpy as np

    out = np.full_like(inner.values, np.nan)
    if k > 0:
        for rows in groups.values():
            block = inner.values[rows]
            ranked = np.where(np.isnan(block), -np.inf if largest else np.inf, block)
            order = np.argsort(-ranked if largest else ranked, axis=0, kind="stable")[:k]
            for position in range(order.shape[0]):
                chosen = order[position]
                columns = np.arange(block.shape[1])
                picked = block[chosen, columns]
                keep = ~np.isnan(picked)
                targets = np.asarray(rows)[chosen]
                out[targets[keep], columns[keep]] = picked[keep]
    keep_rows = ~np.isnan(out).all(axis=1)
    return Matrix([labels for labels, kept in zip(inner.labels, keep_rows, strict=True) if kept], out[keep_rows])


# -- label_replace -----------------------------------------------------------------------------------------------
def _label_replace(inner: Matrix, expr: s.LabelReplace) -> Matrix:
    import numpy as np

    regex = re.compile(expr.regex, re.DOTALL)
    template = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: "\\g<" + (m.group(1) or m.group(2)) + ">", expr.replacement)
    seen: dict[Labels, int] = {}
    for row, labels in enumerate(inner.labels):
        current = dict(labels)
        match = regex.fullmatch(current.get(expr.src, ""))
        if match is not None:
            try:
                value = match.expand(template)
            except (re.error, IndexError):
                value = ""
            if value:
                current[expr.dst] = value
            else:
                current.pop(expr.dst, None)
        key = tuple(sorted(current.items()))
        if key in seen:
            both = ~np.isnan(inner.values[row]) & ~np.isnan(inner.values[seen[key]])
            if both.any():
                raise EvaluationError("vector cannot contain metrics with the same labelset")
        seen[key] = row
    labels = list(seen)
    return Matrix(labels, inner.values[list(seen.values())])


# -- binary operators -----------------------------------------------------------------------------------------------
_ARITHMETIC = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b, "/": lambda a, b: a / b,
    "%": lambda a, b: _fmod(a, b), "^": lambda a, b: _power(a, b),
}
_COMPARE = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
            "<": lambda a, b: a < b, "<=": lambda a, b: a <= b}


def _fmod(a: Any, b: Any) -> Any:
    import numpy as np

    return np.fmod(a, b)


def _power(a: Any, b: Any) -> Any:
    import numpy as np

    return np.power(a, b)


def _apply(op: str, left: np.ndarray, right: np.ndarray, return_bool: bool, keep_left: bool) -> np.ndarray:
    """Element-wise `op`; a comparison keeps the left value (or the right's, scalar on the left) where
    true, NaN where false — or 1/0 with ``bool``."""
    import numpy as np

    with np.errstate(all="ignore"):
        if op in _ARITHMETIC:
            return _ARITHMETIC[op](left, right)
        truth = _COMPARE[op](left, right)
        missing = np.isnan(left) | np.isnan(right)
        if return_bool:
            return np.where(missing, np.nan, truth.astype(float))
        return np.where(truth & ~missing, left if keep_left else right, np.nan)


def _binary(op: str, left: Value, right: Value, return_bool: bool, matching: s.VectorMatching | None) -> Value:
    import numpy as np

    if isinstance(left, Scalar) and isinstance(right, Scalar):
        return Scalar(_apply(op, left.values, right.values, True, True))
    if isinstance(left, Matrix) and isinstance(right, Scalar):
        return Matrix(list(left.labels), _apply(op, left.values, right.values[None, :], return_bool, True))
    if isinstance(left, Scalar) and isinstance(right, Matrix):
        return Matrix(list(right.labels), _apply(op, left.values[None, :], right.values, return_bool, False))
    assert isinstance(left, Matrix) and isinstance(right, Matrix)
    if op in ("and", "or", "unless"):
        return _set_operation(op, left, right, matching)
    return _vector_match(op, left, right, return_bool, matching or s.VectorMatching(False, ()), np)


def _signature(labels: Labels, matching: s.VectorMatching | None) -> Labels:
    if matching is None:
        return labels
    if matching.on:
        return tuple(item for item in labels if item[0] in matching.labels)
    return tuple(item for item in labels if item[0] not in matching.labels)


def _set_operation(op: str, left: Matrix, right: Matrix, matching: s.VectorMatching | None) -> Matrix:
    import numpy as np

    right_present: dict[Labels, np.ndarray] = {}
    for labels, row in zip(right.labels, right.values, strict=True):
        key = _signature(labels, matching)
        right_present[key] = right_present.get(key, np.zeros(len(row), bool)) | ~np.isnan(row)
    none = np.zeros(left.values.shape[1], bool)
    if op in ("and", "unless"):
        rows = []
        for labels, row in zip(left.labels, left.values, strict=True):
            present = right_present.get(_signature(labels, matching), none)
            rows.append(np.where(present if op == "and" else ~present, row, np.nan))
        return Matrix(list(left.labels), np.vstack(rows) if rows else left.values)
    left_present: dict[Labels, np.ndarray] = {}
    for labels, row in zip(left.labels, left.values, strict=True):
        key = _signature(labels, matching)
        left_present[key] = left_present.get(key, np.zeros(len(row), bool)) | ~np.isnan(row)
    labels_out, rows_out = list(left.labels), list(left.values)
    for labels, row in zip(right.labels, right.values, strict=True):
        covered = left_present.get(_signature(labels, matching), none)
        labels_out.append(labels)
        rows_out.append(np.where(covered, np.nan, row))
    return _merge_same(labels_out, np.vstack(rows_out) if rows_out else left.values)


def _merge_same(labels: list[Labels], values: np.ndarray) -> Matrix:
    """Series with the same labels as one (their samples never overlap after a set operation)."""
    import numpy as np

    index: dict[Labels, int] = {}
    rows: list[np.ndarray] = []
    for key, row in zip(labels, values, strict=True):
        if key in index:
            target = rows[index[key]]
            rows[index[key]] = np.where(np.isnan(target), row, target)
        else:
            index[key] = len(rows)
            rows.append(row.copy())
    return Matrix(list(index), np.vstack(rows) if rows else values)


def _vector_match(op: str, left: Matrix, right: Matrix, return_bool: bool, matching: s.VectorMatching,
                  np: Any) -> Matrix:
    group = matching.group
    one, many = (right, left) if group != "right" else (left, right)
    one_side: dict[Labels, int] = {}
    for row, labels in enumerate(one.labels):
        key = _signature(labels, matching)
        if key in one_side:
            both = ~np.isnan(one.values[row]) & ~np.isnan(one.values[one_side[key]])
            if both.any():
                side = "right" if one is right else "left"
                raise EvaluationError(f"found duplicate series for the match group {dict(key)} on the {side} hand-side "
                                      "of the operation; many-to-many matching not allowed: matching labels must be "
                                      "unique on one side")
        one_side[key] = row
    labels_out: list[Labels] = []
    rows_out: list[np.ndarray] = []
    matched: dict[Labels, np.ndarray] = {}  # one-to-one: the steps a signature already matched at
    for row, labels in enumerate(many.labels):
        key = _signature(labels, matching)
        partner = one_side.get(key)
        if partner is None:
            continue
        if group is None:
            present = ~np.isnan(many.values[row])
            if key in matched and (matched[key] & present).any():
                raise EvaluationError(f"multiple matches for labels: many-to-one matching must be explicit "
                                      f"(group_left/group_right) for {dict(key)}")
            matched[key] = matched.get(key, np.zeros(len(present), bool)) | present
        left_row, right_row = (many.values[row], one.values[partner]) if group != "right" else \
            (one.values[partner], many.values[row])
        value = _apply(op, left_row, right_row, return_bool, True)
        labels_out.append(_result_labels(labels, one.labels[partner], matching, op, return_bool))
        rows_out.append(value)
    if not rows_out:
        return Matrix([], np.empty((0, left.values.shape[1])))
    return _merge_same(labels_out, np.vstack(rows_out))


def _result_labels(labels: Labels, other: Labels, matching: s.VectorMatching, op: str, return_bool: bool) -> Labels:
    current = dict(labels)
    if matching.group is None:
        if matching.on:
            current = {k: v for k, v in current.items() if k in matching.labels}
        else:
            current = {k: v for k, v in current.items() if k not in matching.labels}
    else:
        others = dict(other)
        for name in matching.include:
            if name in others:
                current[name] = others[name]
            else:
                current.pop(name, None)
    return tuple(sorted(current.items()))

