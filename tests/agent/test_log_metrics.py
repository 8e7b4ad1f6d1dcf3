"""Metrics from parsed batches, in process (the e2e tests check the same through /metrics)."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.compute as pc

from ranklog.agent.log_metrics import BatchObserver, _signature_prefilter
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
    assert _get(metrics, "ranklog_log_records_total", level="INFO", training_job="j", rank="other") == 2
    assert _get(metrics, "ranklog_metric_label_overflow_total", label="rank") == 2


def test_nan_metric_is_exported_and_step_never_goes_back() -> None:
    metrics, observer = _observer()
    observer.observe(_batch([{"msg": "m", "rank": 0, "step": 7, "attrs": '{"metrics":{"actor/pg_loss":"nan"}}'}]))
    assert math.isnan(_get(metrics, "ranklog_training_metric", training_job="", rank="0", name="actor/pg_loss"))
    older = _batch([{"msg": "m", "rank": 0, "step": 3}])
    older = older.set_column(0, "ts", pa.array([0], pa.timestamp("ns", tz="UTC")))
    observer.observe(older)  # re-read old data (after a restart) does not move the step back
    assert _get(metrics, "ranklog_training_step", training_job="", rank="0") == 7
    assert _get(metrics, "ranklog_last_record_timestamp_seconds", training_job="", rank="0") == 1_796_212_800


def test_one_search_per_batch_finds_what_per_row_matching_finds() -> None:
    """The batch-wide search (anchors and word boundaries dropped, all messages back to back) misses
    no signature a row carries: anchored ones at a value's start, ones in `exc`, ones between plain rows."""
    from collections import Counter

    from ranklog import signatures
    from ranklog.agent.log_metrics import _block_prefilter

    failures = [CUDA_OOM, CUDA_ERROR, NCCL_ERROR, RAY_ACTOR_DIED, RAY_OOM_KILL, nccl_watchdog(3),
                "grad_norm is not finite", "ValueError: bad", "step 3 loss: nan", "actor/pg_loss:nan"]
    for text in failures:
        flagged = pc.match_substring_regex(pa.array(["plain wordy text", text, "more"]),
                                           _block_prefilter())
        assert flagged.to_pylist()[1], text
    rows = [{"msg": f"ordinary step {i} done", "rank": i % 4, "job": "j"} for i in range(200)]
    for k, text in enumerate(failures):
        rows[7 + 19 * k] = {"msg": text, "rank": k % 4, "job": "j"}
    rows[150] = {"msg": "the step failed", "exc": "Traceback (most recent call last):\nRuntimeError: x",
                 "rank": 1, "job": "j"}
    metrics, observer = _observer()
    observer.observe(_batch(rows))
    expected = Counter()
    for row in rows:
        found = signatures.match(f"{row['msg']}\n{row.get('exc') or ''}")
        if found is not None:
            expected[(found.name, str(row["rank"]))] += 1
    assert len(expected) >= 8
    for (name, rank), count in expected.items():
        assert _get(metrics, "ranklog_failure_signatures_total", signature=name, training_job="j", rank=rank) == count

    quiet, quiet_observer = _observer()
    quiet_observer.observe(_batch([{"msg": "nothing to see", "rank": 0, "job": "j"}] * 50))
    (family,) = [m for m in quiet.registry.collect() if m.name == "ranklog_failure_signatures"]
    assert not [s for s in family.samples if s.name.endswith("_total")]
    assert _get(quiet, "ranklog_log_records_total", level="INFO", training_job="j", rank="0") == 50


def test_observer_thread_observes_in_order_and_drains_on_stop() -> None:
    from ranklog.agent.metrics_thread import ObserverThread

    metrics, observer = _observer()
    worker = ObserverThread(observer, backlog=2)
    worker.start()
    for step in range(1, 21):
        worker.submit(_batch([{"msg": "m", "rank": 0, "job": "j", "step": step}]))
    worker.submit(None)
    worker.stop()
    assert _get(metrics, "ranklog_log_records_total", level="INFO", training_job="j", rank="0") == 20
    assert _get(metrics, "ranklog_training_step", training_job="j", rank="0") == 20


def _samples(metrics) -> dict[tuple, float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in metrics.registry.collect()
            for s in family.samples if not s.name.endswith("_created") and not s.name.startswith("process_")}


def test_batches_waiting_together_are_summarized_once_with_the_metrics_of_one_by_one() -> None:
    """Eight files' batches queued while the observer was busy (a trickle's read round) cost one
    summary, and leave every metric as observing them one by one does — counts, steps (two files
    per rank: the newest file's step, not the last row's of the rank), signatures, training
    metrics; a worker's summary between them keeps its place."""
    from ranklog.agent.metrics_thread import ObserverThread

    batches = [_batch([{"msg": NCCL_ERROR if n == 3 else f"step {step}", "rank": n % 4, "job": "j", "step": step,
                        "source_id": f"h:1:{n}:aa", "attrs": f'{{"metrics":{{"actor/pg_loss":{step / 10}}}}}',
                        "ts": (1_796_212_800 + 10 * (8 - n) + step - n) * 10**9}
                       for step in range(n, n + 3)])
               for n in range(8)]  # eight files, two per rank, the earlier file of a rank the newer one
    one_by_one, observer = _observer()
    for batch in batches:
        observer.observe(batch)
    worker_summary = observer.summarizer.summarize(_batch([{"msg": CUDA_OOM, "rank": 9, "job": "j"}]))
    observer.apply(worker_summary)

    grouped, observer = _observer()
    calls = []
    summarize = observer.summarizer.summarize
    observer.summarizer.summarize = lambda batches: calls.append(len(batches)) or summarize(batches)
    thread = ObserverThread(observer, backlog=16)
    for batch in batches[:5]:
        thread.submit(batch)
    thread.submit(worker_summary)
    for batch in batches[5:]:
        thread.submit(batch)
    thread.start()  # everything is already waiting: the thread takes it in one go
    thread.stop()
    assert calls == [5, 3]
    assert _samples(grouped) == _samples(one_by_one)
    assert _get(grouped, "ranklog_failure_signatures_total", signature="nccl_error", training_job="j", rank="3") == 3


def test_a_signatures_event_time_is_a_gauge_and_each_match_is_offered_as_a_suspect() -> None:
    """ranklog_failure_signature_last_timestamp_seconds keeps the newest match's event time (an alert
    on it needs no history); every match reaches the suspect hook with its time."""
    metrics = create("agent")
    seen = []
    observer = BatchObserver(metrics, LabelBudget(metrics.metric_label_overflow), [],
                             lambda *args: seen.append(args))
    observer.observe(_batch([{"msg": "ok", "rank": 0, "job": "j"}, {"msg": CUDA_OOM, "rank": 3, "job": "j"},
                             {"msg": CUDA_OOM, "rank": 3, "job": "j"}]))
    assert _get(metrics, "ranklog_failure_signature_last_timestamp_seconds", signature="cuda_oom",
                training_job="j", rank="3") == 1_796_212_802
    assert seen == [("cuda_oom", "j", 3, 1_796_212_801 * 10**9), ("cuda_oom", "j", 3, 1_796_212_802 * 10**9)]
    older = _batch([{"msg": CUDA_OOM, "rank": 3, "job": "j"}])
    observer.observe(older.set_column(0, "ts", pa.array([0], pa.timestamp("ns", tz="UTC"))))
    assert _get(metrics, "ranklog_failure_signature_last_timestamp_seconds", signature="cuda_oom",
                training_job="j", rank="3") == 1_796_212_802  # re-read old lines never move it back


def test_rank_step_seconds_from_step_timing_and_from_a_duration_field() -> None:
    """Rank 0 logs only its step (one a second: 1 s per step, across two batches too); rank 1 logs a
    compute time as an ``extra=`` field, which wins over its step timing; ``step`` alone is no time."""
    metrics, observer = _observer()
    first = [{"msg": "step done", "rank": 0, "job": "j", "step": s, "source_id": "h:1:0:aa"} for s in (1, 2, 3)]
    observer.observe(_batch(first))
    assert _get(metrics, "ranklog_rank_step_seconds", training_job="j", rank="0") == 1.0
    later = _batch([{"msg": "step done", "rank": 0, "job": "j", "step": 5, "source_id": "h:1:0:aa"}])
    later = later.set_column(0, "ts", pa.array([(1_796_212_800 + 2 + 4) * 10**9], pa.timestamp("ns", tz="UTC")))
    observer.observe(later)  # step 3 at +2 s, step 5 at +6 s: 2 s per step
    assert _get(metrics, "ranklog_rank_step_seconds", training_job="j", rank="0") == 2.0
    timed = [{"msg": "step computed", "rank": 1, "job": "j", "step": s, "source_id": "h:1:1:aa",
              "attrs": f'{{"compute_time": {0.25 * s}, "fwd_bwd_ms": 9, "loss": 0.5}}'} for s in (1, 2, 3)]
    observer.observe(_batch(timed))
    assert _get(metrics, "ranklog_rank_step_seconds", training_job="j", rank="1") == 0.75  # the newest value
    observer.observe(_batch([{"msg": "x", "rank": 2, "job": "j", "step": 1, "attrs": '{"step_count": 3, "iter": 4}'}]))
    assert _get(metrics, "ranklog_rank_step_seconds", training_job="j", rank="2") is None
