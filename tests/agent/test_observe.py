"""Metrics from parsed batches, in process (the e2e tests check the same through /metrics)."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.compute as pc

from ranklog.agent.observe import BatchObserver, _signature_prefilter
from ranklog.metrics import LabelBudget, create
from ranklog.record import rows_to_table
from tests.helpers.layouts import CUDA_ERROR, CUDA_OOM, NCCL_ERROR, RAY_ACTOR_DIED, RAY_OOM_KILL, nccl_watchdog

BASE = {"host": "h", "ip": "127.0.0.1", "source": "/x.log", "source_id": "h:1:1:aa", "format": "ranklog"}


def _batch(rows: list[dict]) -> pa.RecordBatch:
    full = [{"ts": 1_796_212_800 * 10**9 + i * 10**9, "level": "INFO", "offset": i, **BASE, **row}
            for i, row in enumerate(rows)]
    return rows_to_table(full).combine_chunks().to_batches()[0]


def _observer(**budget):
    metrics = create("agent")
    return metrics, BatchObserver(metrics, LabelBudget(metrics.metric_label_overflow, **budget),
                                  ["actor/pg_loss", "perf/throughput"])


def _get(metrics, metric: str, /, **labels) -> float | None:
    return metrics.registry.get_sample_value(metric, labels)


def test_prefilter_flags_every_real_failure_string() -> None:
    texts = [CUDA_OOM, CUDA_ERROR, NCCL_ERROR, RAY_ACTOR_DIED, RAY_OOM_KILL, nccl_watchdog(3),
             "grad_norm is not finite", "ValueError: bad", "an ordinary line"]
    flagged = pc.match_substring_regex(pa.array(texts), _signature_prefilter()).to_pylist()
    assert flagged == [True] * 8 + [False]


def test_label_budget_folds_extra_ranks_into_other() -> None:
    metrics, observer = _observer(max_ranks=3)
    observer.observe(_batch([{"msg": "x", "rank": r, "job": "j"} for r in range(5)]))
    assert _get(metrics, "ranklog_log_records_total", level="INFO", job="j", rank="other") == 2
    assert _get(metrics, "ranklog_metric_label_overflow_total", label="rank") == 2


def test_nan_metric_is_exported_and_step_never_goes_back() -> None:
    metrics, observer = _observer()
    observer.observe(_batch([{"msg": "m", "rank": 0, "step": 7, "attrs": '{"metrics":{"actor/pg_loss":"nan"}}'}]))
    assert math.isnan(_get(metrics, "ranklog_training_metric", job="", rank="0", name="actor/pg_loss"))
    older = _batch([{"msg": "m", "rank": 0, "step": 3}])
    older = older.set_column(0, "ts", pa.array([0], pa.timestamp("ns", tz="UTC")))
    observer.observe(older)  # re-read old data (after a restart) does not move the step back
    assert _get(metrics, "ranklog_training_step", job="", rank="0") == 7
    assert _get(metrics, "ranklog_last_record_timestamp_seconds", job="", rank="0") == 1_796_212_800
