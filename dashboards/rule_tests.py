"""promtool unit tests of the rules: for every alert, a scenario where it fires and one where it must not.

Rendered to ``dashboards/tests/ranklog.rules.test.yml`` by ``python -m dashboards.generate`` and run
with ``promtool test rules``. The scenarios are written against the default :class:`Thresholds`
(the checked-in rule file); expected annotations are rendered from the same templates, so a
changed summary or description is tested too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dashboards import AGENT_JOB, ARCHIVE_JOB, THROUGHPUT_METRIC
from dashboards.rules import SIGNATURE_ALERTS, Alert, Thresholds, alerts, annotations

NODE1, NODE2 = "node1:9400", "node2:9400"
ARCHIVE = "archive1:9500"
TRAIN = "llama-sft-42"


@dataclass(frozen=True)
class Scenario:
    """Input series (``{series: values}`` in promtool notation), when to look, who must be firing."""

    title: str
    series: dict[str, str]
    eval_time: str
    firing: list[dict[str, str]] = field(default_factory=list)  # labels of each alert expected firing
    interval: str = "1m"  # between input samples (hours-long scenarios use a coarser one to stay
    # fast; keep it under Prometheus' 5m lookback so instant lookups never fall between samples)


def _labels(**labels: str) -> str:
    return ",".join(f'{k}="{v}"' for k, v in labels.items())


def _rank(metric: str, rank: str, node: str = NODE1, **extra: str) -> str:
    """A per-rank series as scraped without ``honor_labels``: the scrape job and the training job."""
    return f"{metric}{{{_labels(**extra, instance=node, job=AGENT_JOB, training_job=TRAIN, rank=rank)}}}"


def _up(values: str = "1x600", node: str = NODE1, job: str = AGENT_JOB) -> dict[str, str]:
    return {f"up{{{_labels(instance=node, job=job)}}}": values}


def _per_rank(node: str = NODE1, rank: str = "3") -> dict[str, str]:
    """Labels of an alert that aggregates by (instance, training_job, rank)."""
    return {"instance": node, "training_job": TRAIN, "rank": rank}


def _per_series(node: str = NODE1, rank: str = "3") -> dict[str, str]:
    """Labels of an alert on a raw per-rank series: it keeps the scrape job too."""
    return {**_per_rank(node, rank), "job": AGENT_JOB}


def _error_burst(t: Thresholds) -> tuple[list[Scenario], list[Scenario]]:
    per_min = t.error_burst_errors // 2  # 2.5 × the threshold in a 5m window
    errors = "ranklog_log_records_total"
    fire = [
        Scenario("one rank bursts, its neighbour does not", {
            **_up(), _rank(errors, "3", level="ERROR"): f"0+{per_min}x20",
            _rank(errors, "0", level="ERROR"): "0+1x20", _rank(errors, "3", level="INFO"): "0+500x20",
        }, "10m", [_per_rank(rank="3")]),
        Scenario("a counter born by the burst itself (no earlier sample) still counts", {
            **_up(), _rank(errors, "7", NODE1, level="CRITICAL"): f"_x8 {t.error_burst_errors * 2}x10",
        }, "11m", [_per_rank(rank="7")]),
    ]
    quiet = [Scenario("a steady trickle of errors stays below the threshold", {
        **_up(), _rank(errors, "3", level="ERROR"): "0+5x20", _rank(errors, "3", level="INFO"): "0+900x20",
    }, "10m")]
    return fire, quiet


def _signature(alert: str, names: tuple[str, ...], fresh: bool) -> tuple[list[Scenario], list[Scenario]]:
    """Fires for a new match, not for an old one; with `fresh` (one alert: they share one expression
    builder) also for a match read by an agent Prometheus has no history of, by its event time."""
    sigs, last = "ranklog_failure_signatures_total", "ranklog_failure_signature_last_timestamp_seconds"
    other = "python_exception" if "python_exception" not in names else "cuda_oom"
    fire = [Scenario(f"{names[0]} appears on one rank", {
        **_up(node=NODE2), _rank(sigs, "5", NODE2, signature=names[0]): "_x20 1x10",
        _rank(sigs, "1", NODE2, signature=other): "0+1x30",
    }, "22m", [{**_per_rank(NODE2, "5"), "signature": names[0]}])]
    quiet = [Scenario(f"an old {names[0]} match (long ago) and other signatures do not fire", {
        **_up(), _rank(sigs, "5", signature=names[0]): "1x40", _rank(sigs, "2", signature=other): "0+1x40",
        _rank(last, "5", signature=names[0]): "60x40",
    }, "30m")]
    if fresh:
        fire.append(Scenario(f"{names[0]} read by an agent scraped for 5 minutes only (no history): its event time "
                             "is recent", {
                                 **_up("1x10", NODE2), _rank(sigs, "5", NODE2, signature=names[0]): "_x5 1x5",
                                 _rank(last, "5", NODE2, signature=names[0]): "_x5 290x5",
                             }, "8m", [{**_per_rank(NODE2, "5"), "signature": names[0]}]))
        quiet.append(Scenario(f"a fresh agent reads a {names[0]} line written an hour before", {
            **_up("1x10"), _rank(sigs, "5", signature=names[0]): "_x5 1x5",
            _rank(last, "5", signature=names[0]): "_x5 -3000x5",
        }, "8m"))
    return fire, quiet


def _rank_silent(_: Thresholds) -> tuple[list[Scenario], list[Scenario]]:
    last = "ranklog_last_record_timestamp_seconds"
    fire = [Scenario("rank 3 stops logging while rank 0 keeps going", {
        _rank(last, "0"): "0+60x20", _rank(last, "3", NODE2): "0+60x1 60x19",
    }, "10m", [_per_series(NODE2, "3")])]
    quiet = [Scenario("the whole job stopped logging (ended): no rank is singled out", {
        _rank(last, "0"): "0+60x1 60x19", _rank(last, "3", NODE2): "0+60x1 60x19",
    }, "10m")]
    return fire, quiet


def _stalled(_: Thresholds) -> tuple[list[Scenario], list[Scenario]]:
    step = "ranklog_training_step"
    fire = [Scenario("rank 2 advances 6 steps/min for 30m, then stops", {
        _rank(step, "2"): "0+6x30 180x40", _rank(step, "1"): "0+6x70",
    }, "55m", [_per_rank(rank="2")])]
    quiet = [Scenario("steady progress on every rank", {_rank(step, "2"): "0+6x70", _rank(step, "1"): "0+6x70"},
                      "55m")]
    return fire, quiet


def _straggler(t: Thresholds) -> tuple[list[Scenario], list[Scenario]]:
    step = "ranklog_rank_step_seconds"
    slow = 1.0 / t.straggler_score * 1.5  # well past the median-relative threshold
    fire = [Scenario("rank 2 computes 4x as long as its peers from minute 10 on", {
        _rank(step, "0"): "0.5x40", _rank(step, "1"): "0.5x40", _rank(step, "3", NODE2): "0.52x40",
        _rank(step, "2", NODE2): "0.5x9 2x30",
    }, "35m", [_per_series(NODE2, "2")])]
    quiet = [
        Scenario("every rank got slower together (a slow-down, no straggler)", {
            _rank(step, "0"): "0.5x9 2x30", _rank(step, "1"): "0.5x9 2x30", _rank(step, "2", NODE2): "0.5x9 2x30",
        }, "35m"),
        Scenario(f"one rank {slow:.2f}x slower but only for 3 minutes", {
            _rank(step, "0"): "0.5x40", _rank(step, "1"): "0.5x40", _rank(step, "2", NODE2): f"0.5x20 {0.5 * slow}x3 0.5x17",
        }, "35m"),
        Scenario("a two-rank job: no median to compare with", {
            _rank(step, "0"): "0.5x40", _rank(step, "1"): "0.5x9 2x30"}, "35m"),
    ]
    return fire, quiet


def _throughput(_: Thresholds) -> tuple[list[Scenario], list[Scenario]]:
    tput = _rank("ranklog_training_metric", "0", name=THROUGHPUT_METRIC)
    expected = {**_per_series(rank="0"), "name": THROUGHPUT_METRIC}
    fire = [Scenario("throughput falls from 1000 to 300", {tput: "1000x40 300x20"}, "50m", [expected])]
    quiet = [Scenario("throughput dips by 30% only", {tput: "1000x40 700x20"}, "50m")]
    return fire, quiet


def _down(job: str, node: str) -> Callable[[Thresholds], tuple[list[Scenario], list[Scenario]]]:
    def cases(_: Thresholds) -> tuple[list[Scenario], list[Scenario]]:
        fire = [Scenario(f"{job} target stops answering", _up("1x5 0x20", node, job), "10m",
                         [{"instance": node, "job": job}])]
        quiet = [Scenario(f"{job} target up", _up("1x20", node, job), "10m")]
        return fire, quiet
    return cases


def _gauge(metric: str, job: str, node: str) -> str:
    return f"{metric}{{{_labels(instance=node, job=job)}}}"


def _backlog(_: Thresholds) -> tuple[list[Scenario], list[Scenario]]:
    backlog = _gauge("ranklog_agent_backlog_bytes", AGENT_JOB, NODE1)
    fire = [Scenario("backlog grows by 50 MB a minute", {backlog: "0+50000000x40"}, "35m",
                     [{"instance": NODE1, "job": AGENT_JOB}])]
    quiet = [Scenario("a large but shrinking backlog", {backlog: "900000000-10000000x40"}, "35m")]
    return fire, quiet


def _oldest(_: Thresholds) -> tuple[list[Scenario], list[Scenario]]:
    oldest = _gauge("ranklog_agent_oldest_unshipped_seconds", AGENT_JOB, NODE1)
    fire = [Scenario("nothing acknowledged for 25 minutes", {oldest: "0+60x30"}, "25m",
                     [{"instance": NODE1, "job": AGENT_JOB}])]
    quiet = [Scenario("shipping keeps up (oldest byte a few seconds old)", {oldest: "3x30"}, "25m")]
    return fire, quiet


def _unreadable(_: Thresholds) -> tuple[list[Scenario], list[Scenario]]:
    def gauge(reason: str) -> str:
        return f'ranklog_agent_unreadable_paths{{{_labels(instance=NODE1, job=AGENT_JOB, reason=reason)}}}'

    fire = [Scenario("a 0700 run directory of another user stays unreadable", {
        gauge("permission"): "0x5 2x30", gauge("missing"): "0x35"}, "30m",
        [{"instance": NODE1, "job": AGENT_JOB, "reason": "permission"}])]
    quiet = [
        Scenario("every path readable", {gauge("permission"): "0x40", gauge("not_a_file"): "0x40"}, "30m"),
        Scenario("a file unreadable for 3 minutes (fixed by the operator)", {
            gauge("permission"): "0x20 1x3 0x17"}, "30m"),
    ]
    return fire, quiet


def _source_invalid(_: Thresholds) -> tuple[list[Scenario], list[Scenario]]:
    def gauge(source: str) -> str:
        return f'ranklog_agent_source_errors{{{_labels(instance=NODE1, job=AGENT_JOB, source=source)}}}'

    fire = [Scenario("a typo in a source's format, skipped since the agent started", {gauge("sources[1]"): "1x20"},
                     "10m", [{"instance": NODE1, "job": AGENT_JOB, "source": "sources[1]"}])]
    quiet = [Scenario("every source valid (no series)", {**_up()}, "10m"),
             Scenario("an agent restarted with the typo fixed", {gauge("sources[1]"): "1x3 _x17"}, "10m")]
    return fire, quiet


def _counter_moved(series: str, labels: dict[str, str], fires: tuple[str, str],
                   quiet: tuple[str, str]) -> tuple[list[Scenario], list[Scenario]]:
    """Cases of an alert on an agent counter that must never move. Fires: it moves; a restarted
    agent's series is born at 1. Quiet: it stays 0; it moved an hour ago and not since."""
    alert = {"instance": NODE1, "job": AGENT_JOB, **labels}
    return ([Scenario(fires[0], {**_up(), series: "0x10 1x20"}, "15m", [alert]),
             Scenario(fires[1], {**_up(), series: "_x35 1x20"}, "45m", [alert])],
            [Scenario(quiet[0], {**_up(), series: "0x40"}, "30m"),
             Scenario(quiet[1], {**_up("1x100"), series: "0x10 1x90"}, "95m")])


def _records_lost(_: Thresholds) -> tuple[list[Scenario], list[Scenario]]:
    return _counter_moved(
        f'ranklog_agent_lost_records_total{{{_labels(instance=NODE1, job=AGENT_JOB, reason="refused")}}}',
        {"reason": "refused"},
        ("an archive refused one record and its text stand-in",
         "the agent restarted right after losing a record (series born at 1)"),
        ("nothing lost", "a record lost an hour ago"))


def _unexpected_duplicates(_: Thresholds) -> tuple[list[Scenario], list[Scenario]]:
    return _counter_moved(
        f'ranklog_agent_unexpected_duplicates_total{{{_labels(instance=NODE1, job=AGENT_JOB)}}}', {},
        ("a first send of a record answered 'duplicate' (forged key, shared token)",
         "the agent's first ACK after a restart already held one (series born at 1)"),
        ("only the agent's own re-sends were duplicates (counter stays 0)", "one an hour ago, none since"))


def _parse_worker_restarted(_: Thresholds) -> tuple[list[Scenario], list[Scenario]]:
    return _counter_moved(
        f'ranklog_agent_parse_worker_restarts_total{{{_labels(instance=NODE1, job=AGENT_JOB)}}}', {},
        ("a parse worker was killed (OOM) and replaced", "a worker died before the restarted agent's first scrape (series born at 1)"),
        ("no worker ever died", "a worker died an hour ago, none since"))


def _archive_counter_moved(series: str, labels: dict[str, str], fires: str, quiet: str) -> tuple[list[Scenario],
                                                                                                 list[Scenario]]:
    """An archive counter that must not move: fires when it moves, quiet when it moved an hour ago."""
    up = _up("1x100", ARCHIVE, ARCHIVE_JOB)
    alert = {"instance": ARCHIVE, "job": ARCHIVE_JOB, **labels}
    return ([Scenario(fires, {**up, series: "0x10 1x20"}, "15m", [alert])],
            [Scenario(quiet, {**up, series: "0x10 1x90"}, "95m")])


def _verdict_delivery(_: Thresholds) -> tuple[list[Scenario], list[Scenario]]:
    receiver = {"receiver": "slack1"}
    return _archive_counter_moved(
        f"ranklog_archive_verdict_delivery_failures_total{{{_labels(instance=ARCHIVE, job=ARCHIVE_JOB, **receiver)}}}",
        receiver, "Slack answered 404 to a verdict (a revoked webhook URL)", "one failed delivery an hour ago")


def _triage_failing(_: Thresholds) -> tuple[list[Scenario], list[Scenario]]:
    return _archive_counter_moved(
        f'ranklog_archive_triage_runs_total{{{_labels(instance=ARCHIVE, job=ARCHIVE_JOB, status="error")}}}', {},
        "a triage for an alerted job raised", "a triage failed an hour ago, none since")
def _nul_regions(_: Thresholds) -> tuple[list[Scenario], list[Scenario]]:
    return _counter_moved(
        f'ranklog_agent_nul_bytes_skipped_total{{{_labels(instance=NODE1, job=AGENT_JOB)}}}', {},
        ("a sparse log file's 256 MiB hole passed over", "a crash-zeroed region met right after a restart (series born)"),
        ("no NUL region in any log file", "a region an hour ago, none since"))


def _wal_corruption(_: Thresholds) -> tuple[list[Scenario], list[Scenario]]:
    series = f'ranklog_archive_wal_corrupt_entries_total{{{_labels(instance=ARCHIVE, job=ARCHIVE_JOB)}}}'
    up = _up("1x200", ARCHIVE, ARCHIVE_JOB)
    fire = [Scenario("the archive restarted and its replay found a damaged entry (series born at 1)",
                     {**up, series: "_x100 1x40"}, "7h", [{"instance": ARCHIVE, "job": ARCHIVE_JOB}], interval="4m")]
    quiet = [Scenario("replays found no damage", {**up, series: "0x140"}, "7h", interval="4m"),
             Scenario("damage found 12 hours ago", {**up, series: "_x5 1x195"}, "13h", interval="4m")]
    return fire, quiet


def _unreadable_files(_: Thresholds) -> tuple[list[Scenario], list[Scenario]]:
    gauge = _gauge("ranklog_archive_unreadable_files", ARCHIVE_JOB, ARCHIVE)
    fire = [Scenario("a half-copied file in an hour folder, then moved to the quarantine", {gauge: "0x5 1x30"}, "30m",
                     [{"instance": ARCHIVE, "job": ARCHIVE_JOB}])]
    quiet = [Scenario("every file readable", {gauge: "0x40"}, "30m"),
             Scenario("a bad file removed by the operator within minutes", {gauge: "0x10 1x5 0x25"}, "30m")]
    return fire, quiet


def _token_file(_: Thresholds) -> tuple[list[Scenario], list[Scenario]]:
    agent = f'ranklog_token_file_insecure{{{_labels(instance=NODE1, job=AGENT_JOB)}}}'
    fire = [Scenario("an agent's token file is mode 0644", {agent: "1x20"}, "15m",
                     [{"instance": NODE1, "job": AGENT_JOB}])]
    quiet = [Scenario("mode 0600", {agent: "0x20"}, "15m"),
             Scenario("fixed with chmod 600 within two minutes", {agent: "1x2 0x18"}, "15m")]
    return fire, quiet


def _rejecting(_: Thresholds) -> tuple[list[Scenario], list[Scenario]]:
    rejected = "ranklog_archive_rejected_requests_total"
    unauthorized = f'{rejected}{{{_labels(instance=ARCHIVE, job=ARCHIVE_JOB, reason="unauthorized")}}}'
    fire = [Scenario("an agent with a wrong token keeps retrying", {
        **_up(node=ARCHIVE, job=ARCHIVE_JOB), unauthorized: "0+3x30"}, "20m",
        [{"instance": ARCHIVE, "job": ARCHIVE_JOB, "reason": "unauthorized"}])]
    quiet = [Scenario("rejections long ago, none since", {
        **_up(node=ARCHIVE, job=ARCHIVE_JOB), unauthorized: "5x40"}, "30m")]
    return fire, quiet


def _disk(t: Thresholds) -> tuple[list[Scenario], list[Scenario]]:
    free = _gauge("ranklog_archive_disk_free_bytes", ARCHIVE_JOB, ARCHIVE)
    fire = [Scenario("free space below the minimum", {free: f"{t.disk_free_min_bytes // 2}x20"}, "10m",
                     [{"instance": ARCHIVE, "job": ARCHIVE_JOB}])]
    quiet = [Scenario("plenty of free space", {free: f"{t.disk_free_min_bytes * 5}x20"}, "10m")]
    return fire, quiet


def _retention(_: Thresholds) -> tuple[list[Scenario], list[Scenario]]:
    last_run = _gauge("ranklog_archive_retention_last_run_timestamp_seconds", ARCHIVE_JOB, ARCHIVE)
    up = f"up{{{_labels(instance=ARCHIVE, job=ARCHIVE_JOB)}}}"
    fire = [Scenario("archive up for 7h, retention last ran at start", {up: "1x110", last_run: "0x110"}, "7h",
                     [{"instance": ARCHIVE, "job": ARCHIVE_JOB}], interval="4m")]
    quiet = [
        Scenario("retention runs every 4 minutes", {up: "1x110", last_run: "0+240x110"}, "7h", interval="4m"),
        Scenario("archive restarted 2h ago and retention has not run yet", {
            up: "1x75 0 1x34", last_run: "0x110"}, "7h", interval="4m"),
    ]
    return fire, quiet


def scenarios(t: Thresholds | None = None) -> dict[str, tuple[list[Scenario], list[Scenario]]]:
    """alert name → (scenarios where it fires, scenarios where it must not)."""
    t = t or Thresholds()
    builders: dict[str, Callable[[Thresholds], tuple[list[Scenario], list[Scenario]]]] = {
        "RanklogErrorBurst": _error_burst, "RanklogRankSilent": _rank_silent,
        "RanklogTrainingStalled": _stalled, "RanklogThroughputDropped": _throughput, "RanklogStraggler": _straggler,
        "RanklogAgentDown": _down(AGENT_JOB, NODE1), "RanklogArchiveDown": _down(ARCHIVE_JOB, ARCHIVE),
        "RanklogShippingBacklogGrowing": _backlog, "RanklogOldestUnshippedTooOld": _oldest,
        "RanklogAgentUnreadablePaths": _unreadable, "RanklogAgentRecordsLost": _records_lost,
        "RanklogAgentSourceInvalid": _source_invalid,
        "RanklogAgentUnexpectedDuplicates": _unexpected_duplicates,
        "RanklogAgentParseWorkerRestarted": _parse_worker_restarted,
        "RanklogAgentNulRegions": _nul_regions, "RanklogTokenFileInsecure": _token_file,
        "RanklogArchiveWalCorruption": _wal_corruption, "RanklogArchiveUnreadableFiles": _unreadable_files,
        "RanklogArchiveRejectingIngest": _rejecting, "RanklogArchiveDiskLow": _disk,
        "RanklogRetentionNotRunning": _retention, "RanklogVerdictDeliveryFailing": _verdict_delivery,
        "RanklogTriageFailing": _triage_failing,
    }
    out = {name: builder(t) for name, builder in builders.items()}
    for index, sig in enumerate(SIGNATURE_ALERTS):
        out[sig.alert] = _signature(sig.alert, sig.signatures, fresh=index == 0)
    return out


_LABEL_REF = re.compile(r"\{\{ \$labels\.(\w+) \}\}")


def render_template(text: str, labels: dict[str, str]) -> str:
    """Prometheus' rendering of the only template form the rules use, ``{{ $labels.NAME }}``."""
    return _LABEL_REF.sub(lambda m: labels.get(m.group(1), ""), text)


def _expected(alert: Alert, t: Thresholds, series_labels: dict[str, str]) -> dict[str, Any]:
    labels = {**series_labels, **alert.labels()}
    notes = {key: render_template(value, labels) for key, value in annotations(alert, t).items()}
    return {"exp_labels": labels, "exp_annotations": notes}


def promtool_document(t: Thresholds | None = None, rule_file: str = "../generated/ranklog.rules.yml") -> dict[str, Any]:
    """The promtool test file as a mapping (one test group per scenario)."""
    t = t or Thresholds()
    by_name = {alert.name: alert for alert in alerts(t)}
    tests = []
    for name, (fire, quiet) in scenarios(t).items():
        alert = by_name[name]
        for scenario in [*fire, *quiet]:
            tests.append({
                "name": f"{name}: {scenario.title}",
                "interval": scenario.interval,
                "input_series": [{"series": s, "values": v} for s, v in scenario.series.items()],
                "alert_rule_test": [{
                    "eval_time": scenario.eval_time, "alertname": name,
                    "exp_alerts": [_expected(alert, t, labels) for labels in scenario.firing],
                }],
            })
    return {"rule_files": [rule_file], "evaluation_interval": "1m", "tests": tests}


def render(t: Thresholds | None = None) -> str:
    from dashboards.yaml_output import dump

    header = "# Generated by `python -m dashboards.generate` from dashboards/rule_tests.py; do not edit.\n"
    return dump(promtool_document(t), header)
