"""Metrics read from the logs themselves, updated once per parsed batch with vectorized work.

Per batch: one group-by gives records by (level, job, rank), the newest event time and the latest
training step per (job, rank); one RE2 search over all of a batch's ``msg`` (and ``exc``) bytes at
once tells whether any row may carry a failure signature (almost never; one search per row cost
0.3–0.4 CPU-s per million lines), and only then one RE2 pass per row
(``pyarrow.compute.match_substring_regex``) finds the few candidate rows, which are matched in
Python with :func:`ranklog.signatures.match`; only rows whose ``attrs`` mention an allow-listed
training metric name are JSON-decoded. Python work is per group or per matching row, never per line.
That vectorized half (:class:`BatchSummarizer`) yields plain values (:class:`BatchSummary`), so a parse
worker can do it beside the parse; :class:`BatchObserver` applies them to the metric objects.

Records are counted when read, not when acknowledged: after a crash the unacknowledged tail is read
(and counted) again, a bounded over-count preferred to a metric that lags the logs by the shipping
delay. Labels go through :class:`ranklog.metrics.LabelBudget`; a missing job or rank is the empty
label value. ``ranklog_last_record_timestamp_seconds`` and ``ranklog_training_step`` never move
backwards because of re-read data: the timestamp keeps the maximum, the step the value of the newest
record (by event time). ``ranklog_failure_signature_last_timestamp_seconds`` keeps the maximum too: it
is the event time of a signature's newest record, so an alert on it fires on the first scrape that
sees a failure (a counter born by its first event needs history to tell "born" from "restarted").
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import signatures
from ..metrics import LabelBudget
from ..parse.arrowbytes import values_as_one
from ..record import METRIC_CONTAINERS
from ..record import ts_ns as ts_nanoseconds
from ..step_durations import ATTRS_HINT, best_key

_LOOKAROUND = re.compile(r"\(\?<?[!=][^)]*\)")
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


@dataclass
class BatchSummary:
    """What a batch says for the metrics, as plain values (it crosses from a parse worker by pickle)."""

    records: list[tuple[str, Any, Any, int, int | None]] = field(default_factory=list)  # level, job, rank, count, newest ts_ns
    steps: list[tuple[Any, Any, int, int]] = field(default_factory=list)  # job, rank, last step, newest ts_ns
    step_spans: list[tuple[Any, Any, int, int, int, int]] = field(default_factory=list)  # job, rank, first/last step, their ts_ns
    durations: list[tuple[Any, Any, float, int]] = field(default_factory=list)  # job, rank, seconds per step, ts_ns
    signatures: list[tuple[str, Any, Any, int]] = field(default_factory=list)  # signature, job, rank, ts_ns (per record)
    training: list[tuple[Any, Any, str, float]] = field(default_factory=list)  # job, rank, metric name, value


class BatchSummarizer:
    """The vectorized half of the metrics: a batch → its :class:`BatchSummary` (no metric objects, no state),
    so it can run in a parse worker next to the parse."""

    def __init__(self, training_metrics: list[str]) -> None:
        import pyarrow.compute as pc

        self.allowed = frozenset(training_metrics)
        self._pc = pc
        self._signature_regex = _signature_prefilter()
        self._block_regex = _block_prefilter()
        self._metric_regex = "|".join(re.escape(json.dumps(name)) for name in sorted(self.allowed)) or None

    def summarize(self, batches) -> BatchSummary:
        """The summary of a batch, or of a list of batches in file order taken as one (the set-up
        costs of the group-bys and the regex searches paid once)."""
        out = BatchSummary()
        batches = [b for b in (batches if isinstance(batches, list) else [batches]) if b is not None and b.num_rows]
        if not batches:
            return out
        import pyarrow as pa

        table = pa.Table.from_batches(batches)
        table = table.append_column("ts_ns", pa.array(ts_nanoseconds(table["ts"])))
        self._records(table, out)
        self._steps(table, out)
        self._signatures(table, out)
        if table["attrs"].null_count < table.num_rows:
            if self._metric_regex:
                self._training_metrics(table, out)
            self._durations(table, out)
        return out

    def _records(self, table, out: BatchSummary) -> None:
        grouped = table.group_by(["level", "job", "rank"], use_threads=False).aggregate(
            [("level", "count"), ("ts_ns", "max")]).to_pydict()
        out.records = list(zip(grouped["level"], grouped["job"], grouped["rank"], grouped["level_count"],
                               grouped["ts_ns_max"], strict=True))

    def _steps(self, table, out: BatchSummary) -> None:
        if table["step"].null_count == table.num_rows:
            return
        # File order is logging order: the last non-null step of a group is the rank's newest step —
        # within one file (several files' batches are summarized together; `apply` keeps the step of
        # the newest one, as it does across batches)
        grouped = table.select(["source_id", "job", "rank", "step", "ts_ns"]).group_by(
            ["source_id", "job", "rank"], use_threads=False).aggregate([("step", "last"), ("ts_ns", "max")]).to_pydict()
        out.steps = [(job, rank, step, ts_ns if ts_ns is not None else 0) for job, rank, step, ts_ns in
                     zip(grouped["job"], grouped["rank"], grouped["step_last"], grouped["ts_ns_max"], strict=True)
                     if step is not None]
        # the first and last step of each rank in each file and when it reached them (its step time), in
        # file order: applied in that order, several files' batches taken together give what each alone gives
        stepped = table.filter(self._pc.is_valid(table["step"])).select(["source_id", "job", "rank", "step", "ts_ns"])
        spans = stepped.group_by(["source_id", "job", "rank"], use_threads=False).aggregate(
            [("step", "min"), ("step", "max"), ("ts_ns", "min"), ("ts_ns", "max")]).to_pydict()
        out.step_spans = list(zip(spans["job"], spans["rank"], spans["step_min"], spans["step_max"], spans["ts_ns_min"],
                                  spans["ts_ns_max"], strict=True))

    def _may_carry_signature(self, column) -> bool:
        if column.null_count == len(column):
            return False
        return bool(self._pc.match_substring_regex(values_as_one(column), self._block_regex)[0].as_py())

    def _signatures(self, table, out: BatchSummary) -> None:
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
        rows = candidates.select(["msg", "exc", "job", "rank", "ts_ns"]).to_pydict()
        for msg, exc, job, rank, ts in zip(rows["msg"], rows["exc"], rows["job"], rows["rank"], rows["ts_ns"],
                                           strict=True):
            found = signatures.match(f"{msg or ''}\n{exc or ''}")
            if found is not None:
                out.signatures.append((found.name, job, rank, ts or 0))

    def _durations(self, table, out: BatchSummary) -> None:
        """Per-step duration fields (``compute_time`` …, :mod:`ranklog.step_durations`) of the batch's records."""
        pc = self._pc
        mask = pc.fill_null(pc.match_substring_regex(table["attrs"], ATTRS_HINT), False)
        candidates = table.filter(mask)
        if candidates.num_rows == 0:
            return
        rows = candidates.select(["attrs", "job", "rank", "ts_ns"]).to_pydict()
        for attrs, job, rank, ts in zip(rows["attrs"], rows["job"], rows["rank"], rows["ts_ns"], strict=True):
            try:
                decoded = json.loads(attrs)
            except ValueError:
                continue
            key = best_key(decoded) if isinstance(decoded, dict) else None
            value = decoded.get(key.name) if key is not None else None
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0:
                out.durations.append((job, rank, float(value) * key.scale, ts or 0))

    def _training_metrics(self, table, out: BatchSummary) -> None:
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
            out.training.extend((job, rank, name, value) for name, value in self._numeric_metrics(decoded))

    def _numeric_metrics(self, attrs: dict[str, Any]):
        """Allow-listed numeric values at the top level of attrs or under `data`/`metrics`.

        Non-finite values arrive as strings (``"nan"``, ``"inf"``: JSON has no spelling for them) and
        are exported as such — a NaN loss is exactly what an alert wants to see.
        """
        scopes = [attrs] + [attrs[k] for k in METRIC_CONTAINERS if isinstance(attrs.get(k), dict)]
        for scope in scopes:
            for name, value in scope.items():
                if name not in self.allowed or isinstance(value, bool):
                    continue
                if isinstance(value, (int, float)):
                    yield name, float(value)
                elif isinstance(value, str) and value.strip().lower() in _NON_FINITE:
                    yield name, float(value.strip().lower())


class BatchObserver:
    """Updates the metrics from batches (summarized here) or from summaries (made by a parse worker)."""

    def __init__(self, metrics, budget: LabelBudget, training_metrics: list[str],
                 on_signature: Callable[[str, Any, Any, int], None] | None = None) -> None:
        self.m = metrics
        self.budget = budget
        self.summarizer = BatchSummarizer(training_metrics)
        self.on_signature = on_signature  # (signature, job, rank, ts_ns) of each matching record (the suspect push)
        self._last_ts: dict[tuple[str, str], float] = {}
        self._step_ts: dict[tuple[str, str], int] = {}
        self._signature_ts: dict[tuple[str, str, str], float] = {}
        self._advance: dict[tuple[str, str], tuple[int, int]] = {}  # the last (step, ts_ns) a rank's step time began at
        self._fielded: set[tuple[str, str]] = set()  # ranks whose step time comes from a duration field

    def observe(self, batches) -> None:
        """Update the metrics from a batch or a list of batches in file order (see summarize)."""
        self.apply(self.summarizer.summarize(batches))

    def _labels(self, job: Any, rank: Any) -> tuple[str, str]:
        return self.budget("training_job", _label(job)), self.budget("rank", _label(rank))

    def apply(self, summary: BatchSummary) -> None:
        m = self.m
        newest: dict[tuple[str, str], float] = {}
        for level, job, rank, count, ts in summary.records:
            job_label, rank_label = self._labels(job, rank)
            m.log_records.labels(level=level, training_job=job_label, rank=rank_label).inc(count)
            if ts is not None:
                key = (job_label, rank_label)
                seconds = ts / 1e9
                newest[key] = max(newest.get(key, seconds), seconds)
        for key, seconds in newest.items():
            if seconds > self._last_ts.get(key, -math.inf):
                self._last_ts[key] = seconds
                m.last_record_timestamp_seconds.labels(training_job=key[0], rank=key[1]).set(seconds)
        for job, rank, step, ts_ns in summary.steps:
            key = self._labels(job, rank)
            if ts_ns >= self._step_ts.get(key, -1):
                self._step_ts[key] = ts_ns
                m.training_step.labels(training_job=key[0], rank=key[1]).set(step)
        self._step_seconds(summary)
        for name, job, rank, ts_ns in summary.signatures:
            job_label, rank_label = self._labels(job, rank)
            m.failure_signatures.labels(signature=name, training_job=job_label, rank=rank_label).inc()
            seconds, key = ts_ns / 1e9, (name, job_label, rank_label)
            if seconds > self._signature_ts.get(key, -math.inf):
                self._signature_ts[key] = seconds
                m.failure_signature_last_timestamp_seconds.labels(
                    signature=name, training_job=job_label, rank=rank_label).set(seconds)
            if self.on_signature is not None:
                self.on_signature(name, job, rank, ts_ns)
        for job, rank, name, value in summary.training:
            job_label, rank_label = self._labels(job, rank)
            m.training_metric.labels(training_job=job_label, rank=rank_label, name=self.budget("name", name)).set(value)

    def _step_seconds(self, summary: BatchSummary) -> None:
        """``ranklog_rank_step_seconds``: a duration field when the rank's records carry one (its newest value),
        else the time between its step advances (within a batch and from the previous one)."""
        newest: dict[tuple[str, str], tuple[int, float]] = {}
        for job, rank, seconds, ts in summary.durations:
            key = self._labels(job, rank)
            if ts >= newest.get(key, (-1, 0.0))[0]:
                newest[key] = (ts, seconds)
        for key, (_, seconds) in newest.items():
            self._fielded.add(key)
            self.m.rank_step_seconds.labels(training_job=key[0], rank=key[1]).set(seconds)
        for job, rank, first_step, last_step, first_ts, last_ts in summary.step_spans:
            key = self._labels(job, rank)
            start = self._advance.get(key)
            if start is None or first_step < start[0]:  # the first batch of this rank, or a restart from 0
                start = (first_step, first_ts)
            if last_step > start[0] and last_ts > start[1]:
                if key not in self._fielded:
                    seconds = (last_ts - start[1]) / 1e9 / (last_step - start[0])
                    self.m.rank_step_seconds.labels(training_job=key[0], rank=key[1]).set(seconds)
                self._advance[key] = (last_step, last_ts)
            elif start is not None and key not in self._advance:
                self._advance[key] = start
