"""Metrics read from the logs themselves, updated once per parsed batch with vectorized work.

Per batch: one group-by gives records by (level, job, rank), the newest event time and the latest
training step per (job, rank); one RE2 search over all of a batch's ``msg`` (and ``exc``) bytes at
once tells whether any row may carry a failure signature (almost never; one search per row cost
0.3–0.4 CPU-s per million lines), and only then one RE2 pass per row
(``pyarrow.compute.match_substring_regex``) finds the few candidate rows, which are matched in
Python with :func:`ranklog.signatures.match`; only rows whose ``attrs`` mention an allow-listed
training metric name are JSON-decoded. Python work is per group or per matching row, never per line.

Records are counted when read, not when acknowledged: after a crash the unacknowledged tail is read
(and counted) again, a bounded over-count preferred to a metric that lags the logs by the shipping
delay. Labels go through :class:`ranklog.metrics.LabelBudget`; a missing job or rank is the empty
label value. ``ranklog_last_record_timestamp_seconds`` and ``ranklog_training_step`` never move
backwards because of re-read data: the timestamp keeps the maximum, the step the value of the newest
record (by event time).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .. import signatures
from ..metrics import LabelBudget
from ..parse.arrowbytes import values_as_one
from ..record import ts_ns as ts_nanoseconds

_LOOKAROUND = re.compile(r"\(\?<?[!=][^)]*\)")
_METRIC_CONTAINERS = ("data", "metrics")
_NON_FINITE = frozenset({"nan", "inf", "-inf", "+inf", "infinity", "-infinity"})


_ANCHOR = re.compile(r"(?<!\\)\\[bB]|(?<![\\\[])\^|(?<!\\)\$")


def _signature_prefilter() -> str:
    """One RE2 pattern matching a superset of every signature (lookarounds dropped: RE2 lacks them)."""
    return "(?m)" + "|".join(f"(?:{_LOOKAROUND.sub('', sig.pattern)})" for sig in signatures.SIGNATURES)


def _block_prefilter() -> str:
    """The prefilter without anchors and word boundaries: it can search all values of a column at
    once (values_as_one), where value starts and ends are not line starts and ends. Dropping them
    only widens what matches (the signatures use ``^``, ``$`` and ``\\b`` outside brackets only)."""
    return "|".join(f"(?:{_ANCHOR.sub('', _LOOKAROUND.sub('', sig.pattern))})" for sig in signatures.SIGNATURES)


def _label(value: Any) -> str:
    return "" if value is None else str(value)


class BatchObserver:
    def __init__(self, metrics, budget: LabelBudget, training_metrics: list[str]) -> None:
        import pyarrow.compute as pc

        self.m = metrics
        self.budget = budget
        self.allowed = frozenset(training_metrics)
        self._pc = pc
        self._signature_regex = _signature_prefilter()
        self._block_regex = _block_prefilter()
        self._metric_regex = "|".join(re.escape(json.dumps(name)) for name in sorted(self.allowed)) or None
        self._last_ts: dict[tuple[str, str], float] = {}
        self._step_ts: dict[tuple[str, str], int] = {}

    def observe(self, batch) -> None:
        if batch is None or batch.num_rows == 0:
            return
        import pyarrow as pa

        table = pa.Table.from_batches([batch])
        table = table.append_column("ts_ns", pa.array(ts_nanoseconds(table["ts"])))
        self._records(table)
        self._steps(table)
        self._signatures(table)
        if self._metric_regex and table["attrs"].null_count < table.num_rows:
            self._training_metrics(table)

    def _labels(self, job: Any, rank: Any) -> tuple[str, str]:
        return self.budget("training_job", _label(job)), self.budget("rank", _label(rank))

    def _records(self, table) -> None:
        grouped = table.group_by(["level", "job", "rank"], use_threads=False).aggregate(
            [("level", "count"), ("ts_ns", "max")]).to_pydict()
        newest: dict[tuple[str, str], float] = {}
        for level, job, rank, count, ts in zip(grouped["level"], grouped["job"], grouped["rank"],
                                               grouped["level_count"], grouped["ts_ns_max"], strict=True):
            job_label, rank_label = self._labels(job, rank)
            self.m.log_records.labels(level=level, training_job=job_label, rank=rank_label).inc(count)
            if ts is not None:
                key = (job_label, rank_label)
                seconds = ts / 1e9
                newest[key] = max(newest.get(key, seconds), seconds)
        for key, seconds in newest.items():
            if seconds > self._last_ts.get(key, -math.inf):
                self._last_ts[key] = seconds
                self.m.last_record_timestamp_seconds.labels(training_job=key[0], rank=key[1]).set(seconds)

    def _steps(self, table) -> None:
        if table["step"].null_count == table.num_rows:
            return
        # File order is logging order: the last non-null step of a group is the rank's newest step.
        grouped = table.select(["job", "rank", "step", "ts_ns"]).group_by(["job", "rank"], use_threads=False).aggregate(
            [("step", "last"), ("ts_ns", "max")]).to_pydict()
        for job, rank, step, ts_ns in zip(grouped["job"], grouped["rank"], grouped["step_last"],
                                          grouped["ts_ns_max"], strict=True):
            if step is None:
                continue
            key = self._labels(job, rank)
            ts_ns = ts_ns if ts_ns is not None else 0
            if ts_ns >= self._step_ts.get(key, -1):
                self._step_ts[key] = ts_ns
                self.m.training_step.labels(training_job=key[0], rank=key[1]).set(step)

    def _may_carry_signature(self, column) -> bool:
        if column.null_count == len(column):
            return False
        return bool(self._pc.match_substring_regex(values_as_one(column), self._block_regex)[0].as_py())

    def _signatures(self, table) -> None:
        pc = self._pc
        # the usual batch carries none: one search over all its messages instead of one per message
        if not (self._may_carry_signature(table["msg"]) or self._may_carry_signature(table["exc"])):
            return
        mask = pc.fill_null(pc.match_substring_regex(table["msg"], self._signature_regex), False)
        if table["exc"].null_count < table.num_rows:
            mask = pc.or_(mask, pc.fill_null(pc.match_substring_regex(table["exc"], self._signature_regex), False))
        candidates = table.filter(mask)
        if candidates.num_rows == 0:
            return
        rows = candidates.select(["msg", "exc", "job", "rank"]).to_pydict()
        for msg, exc, job, rank in zip(rows["msg"], rows["exc"], rows["job"], rows["rank"], strict=True):
            found = signatures.match(f"{msg or ''}\n{exc or ''}")
            if found is not None:
                job_label, rank_label = self._labels(job, rank)
                self.m.failure_signatures.labels(signature=found.name, training_job=job_label, rank=rank_label).inc()

    def _training_metrics(self, table) -> None:
        pc = self._pc
        mask = pc.fill_null(pc.match_substring_regex(table["attrs"], self._metric_regex), False)
        candidates = table.filter(mask)
        if candidates.num_rows == 0:
            return
        rows = candidates.select(["attrs", "job", "rank"]).to_pydict()
        for attrs, job, rank in zip(rows["attrs"], rows["job"], rows["rank"], strict=True):
            try:
                decoded = json.loads(attrs)
            except ValueError:
                continue
            if not isinstance(decoded, dict):
                continue
            job_label, rank_label = self._labels(job, rank)
            for name, value in self._numeric_metrics(decoded):
                self.m.training_metric.labels(training_job=job_label, rank=rank_label,
                                              name=self.budget("name", name)).set(value)

    def _numeric_metrics(self, attrs: dict[str, Any]):
        """Allow-listed numeric values at the top level of attrs or under `data`/`metrics`.

        Non-finite values arrive as strings (``"nan"``, ``"inf"``: JSON has no spelling for them) and
        are exported as such — a NaN loss is exactly what an alert wants to see.
        """
        scopes = [attrs] + [attrs[k] for k in _METRIC_CONTAINERS if isinstance(attrs.get(k), dict)]
        for scope in scopes:
            for name, value in scope.items():
                if name not in self.allowed or isinstance(value, bool):
                    continue
                if isinstance(value, (int, float)):
                    yield name, float(value)
                elif isinstance(value, str) and value.strip().lower() in _NON_FINITE:
                    yield name, float(value.strip().lower())
