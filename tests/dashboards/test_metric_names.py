"""Dashboards and rules use only metric names ranklog exports (ranklog.metrics.METRICS)."""

from __future__ import annotations

import pytest

from dashboards.queries import (
    PROMETHEUS_SERIES,
    dashboard_queries,
    metric_names,
    recorded_names,
    rule_queries,
    training_metric_names,
)
from ranklog.agent.agent_config import DEFAULT_TRAINING_METRICS
from ranklog.metrics import METRICS

HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def exported_names() -> set[str]:
    names = set()
    for name, spec in METRICS.items():
        names.add(name)
        if spec.kind == "histogram":
            names.update(name + suffix for suffix in HISTOGRAM_SUFFIXES)
    return names


def all_queries():
    return [*dashboard_queries(), *rule_queries()]


def test_every_metric_name_is_in_the_metrics_module():
    allowed = exported_names() | recorded_names() | PROMETHEUS_SERIES
    unknown = {f"{q.where}: {name}" for q in all_queries() for name in metric_names(q.expr) if name not in allowed}
    assert unknown == set()


def test_the_queries_cover_the_pipeline():
    used = {name for q in all_queries() for name in metric_names(q.expr)}
    for must in ("ranklog_log_records_total", "ranklog_failure_signatures_total", "ranklog_training_step",
                 "ranklog_agent_backlog_bytes", "ranklog_archive_disk_free_bytes", "ALERTS", "ALERTS_FOR_STATE"):
        assert must in used


def test_training_metric_names_are_allow_listed_by_the_agent():
    used = {name for q in all_queries() for name in training_metric_names(q.expr)}
    assert used, "no ranklog_training_metric names found"
    assert used - set(DEFAULT_TRAINING_METRICS) == set()


@pytest.mark.parametrize("expr, expected", [
    ('sum by (instance, le) (rate(ranklog_archive_flush_seconds_bucket{job="x"}[5m]))',
     {"ranklog_archive_flush_seconds_bucket"}),
    ('a_total{level=~"ERROR|up"} unless a_total offset 5m and on(instance) (up offset 5m)', {"a_total", "up"}),
    ("max by (job) (s{rank=~\"$rank\"}) - on(job) group_right() s", {"s"}),
    ('label_values(up{job="ranklog-agent"}, instance)', {"up"}),
    ("histogram_quantile(0.95, x) > 1e3 or vector(0)", {"x"}),
    ("time() - ranklog:recorded:name[6h]", {"ranklog:recorded:name"}),
])
def test_metric_name_extraction(expr, expected):
    assert metric_names(expr) == expected
