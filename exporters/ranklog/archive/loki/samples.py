"""Range aggregations: the samples a log range yields, accumulated into per-series step windows.

At each step ``t`` a window holds the samples with ``t - offset - range < ts <= t - offset`` (Loki's
``(t - range, t]``). A sample is one log entry (value 1, or its line's bytes) or, with ``| unwrap``,
the converted label value. Its series labels are every label of the entry after the pipeline (stream
labels, structured metadata, parsed labels — Loki puts structured metadata into metric series too),
minus the unwrapped label, or only the range aggregation's ``by``/``without`` grouping, or the
grouping of a ``sum`` right above it (summing per-series counts equals counting per group; the
evaluator passes it down, so ``sum by (level) (count_over_time(…))`` never builds per-stream series).

Two ways to read samples, one answer: with no per-entry stages left and no unwrap, a batch's series
come from one dictionary encoding of its key columns (columnar, no Python per row); otherwise each
entry runs the pipeline (:mod:`.entries`). Sums, counts and squares go into difference arrays, a
sample adding to the range of step windows it falls in (memory: series × steps, never samples);
min/max/first/last/quantile keep the samples. Both are charged to the query's budget.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...query import budget
from ...query.budget import QueryBudget
from ...query.logql import syntax as s
from ...query.logql.labels import (
    DETECTED_LEVEL,
    ENTRY_COLUMNS,
    ERROR_DETAILS_LABEL,
    ERROR_LABEL,
    METADATA_COLUMNS,
    SERVICE_NAME,
    STREAM_COLUMNS,
    Labels,
    metadata_of,
    stream_of,
)
from ...query.logql.values import bytes_value, go_duration_seconds, number_value
from . import entries

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

ADDITIVE = frozenset({"count_over_time", "rate", "bytes_over_time", "bytes_rate", "sum_over_time"})
PER_SECOND = frozenset({"rate", "bytes_rate"})
BY_BYTES = frozenset({"bytes_over_time", "bytes_rate"})
KEPT_SAMPLES = frozenset({"min_over_time", "max_over_time", "first_over_time", "last_over_time", "quantile_over_time",
                          "stdvar_over_time", "stddev_over_time"})
_COLUMN_OF = {SERVICE_NAME: "job", DETECTED_LEVEL: "level"}
_KEY_SEPARATOR, _NULL = "\x1f", "\x00"
FLUSH_ROWS = 8192


class PipelineError(budget.QueryAborted):
    """A metric sample still carries ``__error__`` (Loki's pipeline error, a 400)."""


@dataclass(frozen=True)
class Grouping:
    """Which labels a sample's series keeps: all of them, only `labels` (by) or all but them (without)."""

    labels: tuple[str, ...] | None = None  # None: every label
    without: bool = False

    def apply(self, labels: dict[str, str]) -> Labels:
        if self.labels is None:
            return tuple(sorted(labels.items()))
        if self.without:
            return tuple(sorted((k, v) for k, v in labels.items() if k not in self.labels))
        return tuple(sorted((k, v) for k, v in labels.items() if k in self.labels))

    def columns(self) -> list[str]:
        """The record columns the grouped labels come from (attrs for any other name)."""
        if self.labels is None or self.without:
            return [*STREAM_COLUMNS, *METADATA_COLUMNS, "attrs"]
        known = {*STREAM_COLUMNS, *METADATA_COLUMNS}
        out = [_COLUMN_OF.get(name, name) for name in self.labels if _COLUMN_OF.get(name, name) in known]
        if any(_COLUMN_OF.get(name, name) not in known for name in self.labels):
            out.append("attrs")
        return list(dict.fromkeys(out))


class Windows:
    """The step windows of a range aggregation over `steps` (int64 ns, ascending)."""

    def __init__(self, steps: np.ndarray, range_ns: int, offset_ns: int) -> None:
        import numpy as np

        self.steps, self.range_ns, self.offset_ns = steps, range_ns, offset_ns
        gaps = np.diff(steps)
        # query_range's steps are start + k·step: the windows of a time are then arithmetic, not a search
        self.step = int(gaps[0]) if len(gaps) and gaps[0] > 0 and (gaps == gaps[0]).all() else None

    @property
    def scan_range(self) -> tuple[int, int]:
        """[start, end) of the samples any window holds."""
        return (int(self.steps[0]) - self.offset_ns - self.range_ns + 1, int(self.steps[-1]) - self.offset_ns + 1)

    def bounds(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each sample time, the steps [lo, hi) whose windows hold it."""
        import numpy as np

        shifted = ts + self.offset_ns
        if self.step is None:
            return (np.searchsorted(self.steps, shifted, side="left"),
                    np.searchsorted(self.steps, shifted + self.range_ns, side="left"))
        first, count = int(self.steps[0]), len(self.steps)
        # the first step at or after x is ceil((x - first) / step), within [0, count]
        lo = np.clip(-np.floor_divide(first - shifted, self.step), 0, count)
        hi = np.clip(-np.floor_divide(first - self.range_ns - shifted, self.step), 0, count)
        return lo, hi


class Series:
    """Series ids by labels, capped by the query's budget."""

    def __init__(self, running: QueryBudget | None, cap: bool) -> None:
        self.ids: dict[Labels, int] = {}
        self.running, self.cap = running, cap

    def id(self, labels: Labels) -> int:
        found = self.ids.get(labels)
        if found is None:
            found = self.ids[labels] = len(self.ids)
            if self.cap and self.running is not None:
                self.running.check_series(len(self.ids))
        return found


class Sums:
    """Difference arrays per series: a sample adds its weight at its first window and takes it away
    after its last, a cumulative sum gives every window's total. Samples wait in a buffer and go in
    with one ``bincount`` per :data:`PENDING_SAMPLES` (per-sample scatter costs ten times more)."""

    PENDING_SAMPLES = 1 << 18

    def __init__(self, steps: int, channels: int, running: QueryBudget | None) -> None:
        import numpy as np

        self.width, self.running, self.rows = steps + 1, running, 0
        self.arrays = [np.zeros(0) for _ in range(channels)]
        self.pending: list[tuple[np.ndarray, np.ndarray, list[np.ndarray]]] = []
        self.pending_count = 0

    def add(self, ids: np.ndarray, lo: np.ndarray, hi: np.ndarray, weights: list[np.ndarray]) -> None:
        keep = hi > lo
        if not keep.all():
            ids, lo, hi, weights = ids[keep], lo[keep], hi[keep], [w[keep] for w in weights]
        if not len(ids):
            return
        self.rows = max(self.rows, int(ids.max()) + 1)
        base = ids * self.width
        self.pending.append((base + lo, base + hi, weights))
        self.pending_count += len(ids)
        if self.pending_count >= self.PENDING_SAMPLES:
            self._flush()

    def _flush(self) -> None:
        import numpy as np

        cells = self.rows * self.width
        if len(self.arrays[0]) < cells:
            grown = max(cells, 2 * len(self.arrays[0]))
            if self.running is not None:  # the channels, plus one array of a flush's bincount
                self.running.charge((grown - len(self.arrays[0])) * 8 * (len(self.arrays) + 1),
                                    "series of a range aggregation")
            self.arrays = [np.concatenate([array, np.zeros(grown - len(array))]) for array in self.arrays]
        if not self.pending:
            return
        cells_at = np.concatenate([p[0] for p in self.pending] + [p[1] for p in self.pending])
        size = len(self.arrays[0])
        for channel, array in enumerate(self.arrays):
            weight = np.concatenate([p[2][channel] for p in self.pending])
            array += np.bincount(cells_at, np.concatenate([weight, -weight]), size)
        self.pending, self.pending_count = [], 0

    def totals(self, channel: int, series: int) -> np.ndarray:
        import numpy as np

        self.rows = max(self.rows, series)
        self._flush()
        grid = self.arrays[channel][:series * self.width].reshape(series, self.width)
        return np.cumsum(grid, axis=1)[:, :-1]


class Kept:
    """The samples themselves (time, value) per series, for min/max/first/last/quantile."""

    def __init__(self, running: QueryBudget | None) -> None:
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.running = running

    def add(self, ids: np.ndarray, ts: np.ndarray, values: np.ndarray) -> None:
        if self.running is not None:
            self.running.charge(len(ids) * 24, "samples of a range aggregation")
        self.parts.append((ids, ts, values))

    def per_series(self, series: int) -> list[tuple[np.ndarray, np.ndarray]]:
        import numpy as np

        if not self.parts:
            return [(np.empty(0, np.int64), np.empty(0)) for _ in range(series)]
        ids = np.concatenate([p[0] for p in self.parts])
        ts = np.concatenate([p[1] for p in self.parts])
        values = np.concatenate([p[2] for p in self.parts])
        order = np.lexsort((ts, ids))
        ids, ts, values = ids[order], ts[order], values[order]
        cuts = np.searchsorted(ids, np.arange(series + 1))
        return [(ts[cuts[i]:cuts[i + 1]], values[cuts[i]:cuts[i + 1]]) for i in range(series)]


# -- evaluation ---------------------------------------------------------------------------------------------
@dataclass
class RangeResult:
    labels: list[Labels]
    values: np.ndarray  # series × steps, NaN where a window is empty


def evaluate_range(source: Any, expr: s.RangeAggregation, steps: np.ndarray, pushed: Grouping | None,
                   cap_series: bool) -> RangeResult:
    """`expr` at `steps`; `pushed` is the grouping of a ``sum`` directly above an additive function."""
    import numpy as np

    running = budget.current()
    windows = Windows(steps, expr.range_ns, expr.offset_ns)
    grouping = pushed or (Grouping(expr.grouping.labels, expr.grouping.without) if expr.grouping else Grouping())
    series = Series(running, cap_series)
    function = expr.function
    if function == "absent_over_time":
        return _absent(source, expr, windows)
    sums = Sums(len(steps), 2, running)
    kept = Kept(running) if function in KEPT_SAMPLES else None

    def accept(ids: np.ndarray, ts: np.ndarray, values: np.ndarray) -> None:
        lo, hi = windows.bounds(ts)
        sums.add(ids, lo, hi, [values, np.ones(len(ids))])
        if kept is not None:
            kept.add(ids, ts, values)

    if expr.selector.never:
        return RangeResult([], np.empty((0, len(steps))))
    start, end = windows.scan_range
    query_plan = entries.plan(expr.selector, start, end)
    if not query_plan.stages and expr.unwrap is None:
        _columnar(source, query_plan, grouping, series, function in BY_BYTES, accept)
    else:
        _per_entry(source, query_plan, expr, grouping, series, accept)
    count = len(series.ids)
    labels = sorted(series.ids, key=series.ids.__getitem__)
    if not count:
        return RangeResult([], np.empty((0, len(steps))))
    totals, counts = sums.totals(0, count), sums.totals(1, count)
    present = counts > 0.5
    with np.errstate(invalid="ignore", divide="ignore"):
        if function in ADDITIVE or (function == "rate" and expr.unwrap is not None):
            values = totals / (expr.range_ns / 1e9) if function in PER_SECOND else totals.copy()
        elif function == "avg_over_time":
            values = totals / counts
        else:
            assert kept is not None
            values = _from_samples(function, expr.param, kept.per_series(count), windows)
    values = np.where(present, values, np.nan)
    return RangeResult(labels, values)


def _key_strings(batch: pa.RecordBatch, columns: list[str]) -> pa.Array:
    """One key per row: the grouped columns' values joined (a null as \\x00); one column is its own key."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(columns) == 1 and pa.types.is_string(batch.column(columns[0]).type):
        return pc.fill_null(batch.column(columns[0]), _NULL)
    parts = []
    for name in columns:
        column = batch.column(name)
        if not pa.types.is_string(column.type):
            column = column.cast(pa.string())
        parts.append(pc.fill_null(column, _NULL))
    if not parts:
        return pa.array([""] * batch.num_rows, pa.string())
    return pc.binary_join_element_wise(*parts, _KEY_SEPARATOR) if len(parts) > 1 else parts[0]


def _labels_of_key(key: str, columns: list[str]) -> dict[str, str]:
    if not columns:
        return {}
    values: dict[str, Any] = {name: (None if text == _NULL else text)
                              for name, text in zip(columns, key.split(_KEY_SEPARATOR), strict=True)}
    labels = stream_of(values.get("job"), values.get("host"), values.get("rank"), values.get("level"),
                       values.get("format"))
    labels.update(metadata_of(values, values.get("attrs")))
    return labels


def _columnar(source: Any, query_plan: entries.Plan, grouping: Grouping, series: Series, by_bytes: bool,
              accept: Callable[..., None]) -> None:
    import numpy as np
    import pyarrow.compute as pc

    from ...record import ts_ns

    columns = grouping.columns()
    read = ["ts", *columns, *(("msg", "exc") if by_bytes else ())]
    for batch in entries.batches(source, query_plan, list(dict.fromkeys(read))):
        encoded = pc.dictionary_encode(_key_strings(batch, columns))
        mapping = np.fromiter((series.id(grouping.apply(_labels_of_key(key, columns)))
                               for key in encoded.dictionary.to_pylist()), np.int64)
        ids = mapping[encoded.indices.to_numpy(zero_copy_only=False)]
        weights = _line_bytes(batch) if by_bytes else np.ones(batch.num_rows)
        accept(ids, ts_ns(batch.column("ts")), weights)


def _line_bytes(batch: pa.RecordBatch) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc

    size = pc.binary_length(batch.column("msg").cast(pa.binary()))
    exc = pc.add(pc.binary_length(batch.column("exc").cast(pa.binary())), 1)
    return pc.add(size, pc.coalesce(exc, 0)).cast(pa.float64()).to_numpy(zero_copy_only=False)


_CONVERSIONS: dict[str, Callable[[str], float]] = {"": number_value, "duration": go_duration_seconds,
                                                   "bytes": bytes_value}


def _per_entry(source: Any, query_plan: entries.Plan, expr: s.RangeAggregation, grouping: Grouping, series: Series,
               accept: Callable[..., None]) -> None:
    import numpy as np

    from .pipeline import Pipeline

    unwrap = expr.unwrap
    post = Pipeline(unwrap.post_filters) if unwrap is not None else None
    convert = _CONVERSIONS[unwrap.conversion] if unwrap is not None else None
    by_bytes = expr.function in BY_BYTES
    ids: list[int] = []
    times: list[int] = []
    values: list[float] = []
    for entry in entries.entries(source, query_plan, list(ENTRY_COLUMNS)):
        value = float(len(entry.line.encode())) if by_bytes else 1.0
        if unwrap is not None:
            assert convert is not None and post is not None
            text = entry.get(unwrap.label)
            if not text:  # a line without the label yields no sample (Loki, issue #6713)
                continue
            entry.remove(unwrap.label)
            try:
                value = convert(text)
            except ValueError as exc:
                entry.set_error("SampleExtractionErr", str(exc))
            if not post.run(entry):
                continue
        labels = entry.all_labels()
        if ERROR_LABEL in labels:
            raise PipelineError(_pipeline_error(labels))
        ids.append(series.id(grouping.apply(labels)))
        times.append(entry.ts)
        values.append(value)
        if len(ids) >= FLUSH_ROWS:
            accept(np.asarray(ids, np.int64), np.asarray(times, np.int64), np.asarray(values))
            ids, times, values = [], [], []
    if ids:
        accept(np.asarray(ids, np.int64), np.asarray(times, np.int64), np.asarray(values))


def _pipeline_error(labels: dict[str, str]) -> str:
    error = labels[ERROR_LABEL]
    shown = "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != ERROR_DETAILS_LABEL) + "}"
    return (f"pipeline error: '{error}' for series: '{shown}'.\nUse a label filter to intentionally skip this error. "
            f"(e.g | __error__!=\"{error}\").\nTo skip all potential errors you can match empty errors.(e.g "
            "__error__=\"\")\nThe label filter can also be specified after unwrap. (e.g | unwrap latency | "
            "__error__=\"\" )")


def _absent(source: Any, expr: s.RangeAggregation, windows: Windows) -> RangeResult:
    """1 at the steps whose window holds no sample, labelled with the selector's equality matchers."""
    import numpy as np

    counted = evaluate_range(source, s.RangeAggregation("count_over_time", expr.selector, expr.range_ns,
                                                        expr.offset_ns), windows.steps, Grouping(()), False)
    present = (~np.isnan(counted.values)).any(axis=0) if len(counted.labels) else np.zeros(len(windows.steps), bool)
    labels = tuple(sorted({name: value for name, op, value in expr.selector.matchers if op == "="}.items()))
    return RangeResult([labels], np.where(present, np.nan, 1.0)[None, :])


def _from_samples(function: str, param: float | None, per_series: list[tuple[np.ndarray, np.ndarray]],
                  windows: Windows) -> np.ndarray:
    import numpy as np

    out = np.full((len(per_series), len(windows.steps)), np.nan)
    shifted = windows.steps - windows.offset_ns
    for row, (ts, values) in enumerate(per_series):
        if not len(ts):
            continue
        budget.check()
        hi = np.searchsorted(ts, shifted, side="right")
        lo = np.searchsorted(ts, shifted - windows.range_ns, side="right")
        filled = hi > lo
        if function == "first_over_time":
            out[row, filled] = values[lo[filled]]
        elif function == "last_over_time":
            out[row, filled] = values[hi[filled] - 1]
        elif function in ("min_over_time", "max_over_time"):
            out[row, filled] = _range_extreme(values, lo[filled], hi[filled], function == "max_over_time")
        elif function in ("stdvar_over_time", "stddev_over_time"):
            variance = _window_variance(values, lo[filled], hi[filled])
            out[row, filled] = np.sqrt(variance) if function == "stddev_over_time" else variance
        else:
            phi = param if param is not None else math.nan
            for step in np.flatnonzero(filled):
                out[row, step] = _quantile(phi, values[lo[step]:hi[step]])
    return out


def _window_variance(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Population variance of values[lo:hi] per window, from prefix sums of the values shifted by their
    mean (well conditioned); a window of one sample is exactly 0, as Loki computes it."""
    import numpy as np

    shifted = values - values.mean()
    first = np.concatenate([[0.0], np.cumsum(shifted)])
    second = np.concatenate([[0.0], np.cumsum(shifted * shifted)])
    count = (hi - lo).astype(float)
    mean = (first[hi] - first[lo]) / count
    variance = np.maximum((second[hi] - second[lo]) / count - mean * mean, 0.0)
    return np.where(count > 1, variance, 0.0)


def _range_extreme(values: np.ndarray, lo: np.ndarray, hi: np.ndarray, maximum: bool) -> np.ndarray:
    """min/max of values[lo:hi] for many windows at once (a sparse table: O(n log n) build, O(1) per window)."""
    import numpy as np

    reduce = np.maximum if maximum else np.minimum
    table = [values]
    length = 1
    while length * 2 <= len(values):
        previous = table[-1]
        table.append(reduce(previous[:-length], previous[length:]))
        length *= 2
    sizes = hi - lo
    level = np.floor(np.log2(np.maximum(sizes, 1))).astype(np.int64)
    out = np.empty(len(lo))
    for k in np.unique(level):
        rows = level == k
        span = 1 << int(k)
        out[rows] = reduce(table[k][lo[rows]], table[k][hi[rows] - span])
    return out


def _quantile(phi: float, values: np.ndarray) -> float:
    """Prometheus' quantile: linear interpolation between closest ranks; φ outside [0, 1] gives ±Inf."""
    import numpy as np

    if math.isnan(phi):
        return math.nan
    if phi < 0:
        return -math.inf
    if phi > 1:
        return math.inf
    ordered = np.sort(values)
    rank = phi * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    weight = rank - low
    return float(ordered[low] * (1 - weight) + ordered[high] * weight)
