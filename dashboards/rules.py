"""ranklog's Prometheus alerting and recording rules, as Python data rendered to rule YAML.

Every threshold is a field of :class:`Thresholds` (defaults in one place). The checked-in
``generated/ranklog.rules.yml`` uses the defaults; a deployment renders its own with overrides::

    python -m dashboards.rules --set error_burst_errors=100 --set disk_free_min_bytes=50GiB -o rules.yml

(the Ansible prometheus role does exactly that with its ``prometheus_ranklog_alert_thresholds`` mapping).

Decisions the spec left open, written down here:

* Counters such as ``ranklog_failure_signatures_total`` are born by their first event, so a plain
  ``increase()`` never sees the jump from "no series" to 1. :func:`new_or_increase` treats a
  series that did not exist one window ago as having grown from zero — but only when Prometheus
  was already scraping that target one window ago, so a Prometheus restart or a freshly added
  target does not page for old history.
* The training job id is the label ``training_job``; ``job`` stays the operator's scrape job (no
  ``honor_labels`` needed, see :mod:`dashboards`); the node is ``instance``. Every per-rank alert
  carries instance, training_job, rank.
* "Training stalled" compares the time since the step last changed with ``stall_factor`` times
  the recent step time (never less than ``stall_min``). A job that finished normally looks the
  same as a hang to these metrics, so the alert is a *warning* and clears itself ``stall_lookback``
  after the last step.
* "Retention not running" only fires when the archive has been up for the whole
  ``retention_stale_after`` window, so a restarted archive gets one full period to run retention.
* Annotations use only ``$labels`` (and the thresholds, rendered in at generation time), so the
  promtool tests can state the exact text a receiver will get.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dashboards import AGENT_JOB, ARCHIVE_JOB, ERROR_LEVELS, GENERATED_DIR, THROUGHPUT_METRIC

RULES_FILE = GENERATED_DIR / "ranklog.rules.yml"
RUNBOOK_URL = "https://github.com/ranklog/ranklog/blob/main/dashboards/RUNBOOK.md"
SIZE_FIELDS = ("backlog_min_bytes", "disk_free_min_bytes")
FAILURE_GROUP = "ranklog-failures.rules"
OPTIONAL_DURATIONS = ("signature_eval_interval",)  # "" means Prometheus' own default


@dataclass(frozen=True)
class Thresholds:
    """Every tunable of the rules. Durations are Prometheus durations (``90s``, ``5m``, ``6h``)."""

    error_burst_errors: int = 50  # ERROR/CRITICAL records of one rank within the window …
    error_burst_window: str = "5m"
    error_burst_for: str = "1m"
    signature_window: str = "15m"  # a signature alert stays firing this long after the last match
    signature_for: str = "0s"
    # How often the failure alerts' rule group is evaluated ("" = Prometheus' evaluation_interval).
    # A target's scrape and a group's evaluation run at fixed phases apart (both hashed, both 15 s by
    # default): up to a whole interval is added to every page of that target. 5 s bounds it to 5 s
    # (docs/verdict.md measures both); the group is a few cheap expressions.
    signature_eval_interval: str = "5s"
    silent_after: str = "5m"  # a rank with no record for this long …
    others_fresh_within: str = "2m"  # … while another rank of its job logged within this
    silent_for: str = "2m"
    stall_factor: float = 5.0  # step unchanged for this many times the recent step time …
    stall_min: str = "10m"  # … and for at least this long
    stall_for: str = "5m"
    step_time_window: str = "30m"  # window of the "recent step time"
    progress_resolution: str = "2m"  # a step change within this counts as "advancing now" (>= 2 scrapes)
    stall_lookback: str = "6h"
    straggler_score: float = 0.75  # a rank slower than its job's median step time by 1/this (NVRx's relative score)
    straggler_for: str = "10m"
    straggler_min_ranks: int = 3  # ranks of a job reporting step time (a median of two is their mean)
    throughput_drop_fraction: float = 0.5  # throughput below (1 - this) × its average over …
    throughput_baseline: str = "30m"
    throughput_for: str = "5m"
    agent_down_for: str = "2m"
    archive_down_for: str = "2m"
    backlog_min_bytes: int = 256 * 1024**2  # backlog above this and growing over the window
    backlog_growth_window: str = "15m"
    backlog_for: str = "15m"
    oldest_unshipped_max: str = "15m"
    oldest_unshipped_for: str = "5m"
    unreadable_paths_for: str = "10m"  # a path the agent cannot read for this long (not a passing race)
    source_errors_for: str = "1m"  # an agent skips a configured source (a typo does not fix itself)
    lost_records_window: str = "30m"  # an agent gave up on a record within this window: alert at once
    unexpected_duplicates_window: str = "30m"  # an archive claimed records the agent never sent: alert at once
    parse_worker_restarts_window: str = "30m"  # a parse worker of an agent died within this window: alert at once
    verdict_failures_window: str = "30m"  # a verdict not delivered / a triage failed within this window: alert at once
    nul_regions_window: str = "30m"  # an agent passed over NUL-only regions within this window: alert at once
    wal_corruption_window: str = "6h"  # an archive lost acknowledged entries to WAL damage within this window
    unreadable_files_for: str = "10m"  # unreadable Parquet files in an archive's root for this long
    token_file_insecure_for: str = "5m"  # a token file readable by every user for this long
    rejected_requests: int = 0  # more than this many refused requests within the window
    rejected_window: str = "10m"
    rejected_for: str = "2m"
    disk_free_min_bytes: int = 10 * 1024**3
    disk_free_for: str = "5m"
    retention_stale_after: str = "6h"
    retention_for: str = "10m"
    # Where RUNBOOK.md is served (absolute: a notification has no base to resolve a relative link
    # against); each alert links its anchor. The prometheus role swaps this base for its
    # prometheus_ranklog_runbook_url when it deploys the rule file.
    runbook_url: str = RUNBOOK_URL

    def seconds(self, name: str) -> float:
        from ranklog.units import parse_duration

        return parse_duration(getattr(self, name))


@dataclass(frozen=True)
class FailureSignatureAlert:
    """One alert over a group of signature names (values of ranklog.signatures.SIGNATURES)."""

    alert: str
    signatures: tuple[str, ...]
    what: str
    severity: str = "critical"


_NAMED_SIGNATURE_ALERTS: tuple[FailureSignatureAlert, ...] = (
    FailureSignatureAlert("RanklogCudaOutOfMemory", ("cuda_oom",), "CUDA out of memory"),
    FailureSignatureAlert("RanklogCudaError", ("cuda_error",), "a CUDA error"),
    FailureSignatureAlert("RanklogNcclTimeout", ("nccl_timeout",), "an NCCL/collective timeout"),
    FailureSignatureAlert("RanklogNcclError", ("nccl_error",), "an NCCL error"),
    FailureSignatureAlert("RanklogRayActorDied", ("ray_actor_died", "raylet_died"), "a Ray actor or raylet death"),
    FailureSignatureAlert("RanklogHostOomKill", ("ray_oom_kill", "kernel_oom_kill"), "a host OOM kill"),
    FailureSignatureAlert("RanklogDiskFull", ("disk_full",), "a full disk or exceeded quota (ENOSPC/EDQUOT)"),
    FailureSignatureAlert("RanklogDataLoaderWorkerDied", ("dataloader_worker_died",), "a data-loader worker that died"),
    FailureSignatureAlert("RanklogCheckpointFailed", ("checkpoint_save_failed", "checkpoint_load_failed"),
                          "a checkpoint that could not be saved or loaded"),
    FailureSignatureAlert("RanklogStorageConnectionLost", ("storage_connection_lost",),
                          "a lost connection to storage (NFS, FUSE, object store)", "warning"),
    FailureSignatureAlert("RanklogNonFiniteValues", ("nonfinite_grad", "nan_loss"),
                          "a non-finite loss or gradient", "warning"),
)


def _every_other_signature(named: tuple[FailureSignatureAlert, ...]) -> tuple[FailureSignatureAlert, ...]:
    """Two alerts for the signatures no named alert watches, so every failure line pages (and gets a
    verdict): causes (an uncaught exception, a SIGKILL, …) and consequences (a lost peer, a gloo
    timeout, a launcher reporting its child's failure, …). Taken from ranklog.signatures, so a new
    signature is watched the day it is added."""
    from ranklog.signatures import SIGNATURES

    covered = {name for alert in named for name in alert.signatures}
    causes = tuple(s.name for s in SIGNATURES if s.name not in covered and not s.consequence)
    consequences = tuple(s.name for s in SIGNATURES if s.name not in covered and s.consequence)
    return (FailureSignatureAlert("RanklogRankFailed", causes, "a failure (an uncaught exception, a kill, …)"),
            FailureSignatureAlert("RanklogFailureConsequence", consequences,
                                  "the consequence of a failure elsewhere (a lost peer, a collective timeout, …)",
                                  "warning"))


SIGNATURE_ALERTS: tuple[FailureSignatureAlert, ...] = (
    *_NAMED_SIGNATURE_ALERTS, *_every_other_signature(_NAMED_SIGNATURE_ALERTS))


@dataclass(frozen=True)
class Alert:
    """An alerting rule; ``summary`` and ``description`` may use ``{{ $labels.NAME }}`` only."""

    name: str
    expr: str
    for_: str
    severity: str
    component: str
    summary: str
    description: str
    group: str
    extra_labels: dict[str, str] = field(default_factory=dict)

    def labels(self) -> dict[str, str]:
        return {"severity": self.severity, "component": self.component, **self.extra_labels}


@dataclass(frozen=True)
class Record:
    name: str
    expr: str
    group: str


def wrap_expr(expr: str, width: int = 100) -> str:
    """`expr` broken into lines at spaces (PromQL ignores the line breaks), for a readable rule file."""
    import textwrap

    if len(expr) <= width:
        return expr
    return "\n".join(textwrap.wrap(expr, width=width, break_long_words=False, break_on_hyphens=False))


def runbook_anchor(alert_name: str) -> str:
    """GitHub-style anchor of the RUNBOOK.md heading ``## <alert name>``."""
    return alert_name.lower()


def new_or_increase(selector: str, window: str) -> str:
    """How much a counter grew within `window`, counting a series born inside it from zero."""
    born = f"(0 + ({selector} unless {selector} offset {window}) and on(instance) (up offset {window}))"
    return f"({born} or increase({selector}[{window}]))"


def _records(t: Thresholds) -> list[Record]:
    group = "ranklog-training.rules"
    window_s = int(t.seconds("step_time_window"))
    return [
        Record("ranklog:training_step_advanced_timestamp_seconds",
               f"timestamp(changes(ranklog_training_step[{t.progress_resolution}]) > 0)", group),
        Record("ranklog:training_step_seconds:recent",
               f"{window_s} / (delta(ranklog_training_step[{t.step_time_window}]) > 0)", group),
    ]


def _signature_alerts(t: Thresholds) -> list[Alert]:
    """One alert per signature group: the counter grew (or was born) within the window, or — with no
    history needed, so on the first scrape of a fresh agent or Prometheus — the newest matching record
    is younger than the window."""
    out = []
    by = "instance, training_job, rank, signature"
    for sig in SIGNATURE_ALERTS:
        names = f'signature=~"{"|".join(sig.signatures)}"'
        selector = f"ranklog_failure_signatures_total{{{names}}}"
        recent = (f"min by ({by}) (time() - ranklog_failure_signature_last_timestamp_seconds{{{names}}})"
                  f" < {t.seconds('signature_window'):g}")
        out.append(Alert(
            sig.alert,
            f"sum by ({by}) ({new_or_increase(selector, t.signature_window)}) > 0 or {recent}",
            t.signature_for, sig.severity, "training",
            f"{sig.what[0].upper()}{sig.what[1:]} on rank {{{{ $labels.rank }}}} of job {{{{ $labels.training_job }}}}",
            f"Rank {{{{ $labels.rank }}}} of job {{{{ $labels.training_job }}}} on node {{{{ $labels.instance }}}} logged "
            f"{sig.what} (signature {{{{ $labels.signature }}}}) within the last {t.signature_window}.",
            FAILURE_GROUP))
    return out


def _training_alerts(t: Thresholds) -> list[Alert]:
    group = "ranklog-training.rules"
    errors = f'ranklog_log_records_total{{level=~"{ERROR_LEVELS}"}}'
    throughput = f'ranklog_training_metric{{name="{THROUGHPUT_METRIC}"}}'
    keep = 1 - t.throughput_drop_fraction
    return [
        Alert("RanklogErrorBurst",
              f"sum by (instance, training_job, rank) ({new_or_increase(errors, t.error_burst_window)})"
              f" > {t.error_burst_errors}",
              t.error_burst_for, "warning", "training",
              "Error burst on rank {{ $labels.rank }} of job {{ $labels.training_job }}",
              f"Rank {{{{ $labels.rank }}}} of job {{{{ $labels.training_job }}}} on node {{{{ $labels.instance }}}} logged "
              f"more than {t.error_burst_errors} ERROR/CRITICAL records within {t.error_burst_window}.",
              group),
        Alert("RanklogRankSilent",
              f"(time() - ranklog_last_record_timestamp_seconds) > {t.seconds('silent_after'):g}"
              f" and on(training_job) (time() - max by (training_job) (ranklog_last_record_timestamp_seconds))"
              f" < {t.seconds('others_fresh_within'):g}",
              t.silent_for, "critical", "training",
              "Rank {{ $labels.rank }} of job {{ $labels.training_job }} went silent",
              f"Rank {{{{ $labels.rank }}}} of job {{{{ $labels.training_job }}}} on node {{{{ $labels.instance }}}} has "
              f"written no log record for more than {t.silent_after} while other ranks of the job logged "
              f"within {t.others_fresh_within}: it may be hung or dead.",
              group),
        Alert("RanklogTrainingStalled",
              f"(time() - max_over_time(ranklog:training_step_advanced_timestamp_seconds[{t.stall_lookback}]))"
              f" > on(instance, training_job, rank) clamp_min({t.stall_factor:g}"
              f" * last_over_time(ranklog:training_step_seconds:recent[{t.stall_lookback}]),"
              f" {t.seconds('stall_min'):g})",
              t.stall_for, "warning", "training",
              "Training stalled on rank {{ $labels.rank }} of job {{ $labels.training_job }}",
              f"The training step of rank {{{{ $labels.rank }}}} of job {{{{ $labels.training_job }}}} on node "
              f"{{{{ $labels.instance }}}} has not advanced for more than {t.stall_factor:g} times its recent "
              f"step time (and at least {t.stall_min}).",
              group),
        Alert("RanklogStraggler",
              f"ranklog_rank_step_seconds > on(training_job) group_left() ({1 / t.straggler_score:.4g}"
              f" * quantile by (training_job) (0.5, ranklog_rank_step_seconds))"
              f" and on(training_job) count by (training_job) (ranklog_rank_step_seconds)"
              f" >= {t.straggler_min_ranks}",
              t.straggler_for, "warning", "training",
              "Straggler: rank {{ $labels.rank }} of job {{ $labels.training_job }} holds its steps back",
              f"Rank {{{{ $labels.rank }}}} of job {{{{ $labels.training_job }}}} on node {{{{ $labels.instance }}}} "
              f"has taken more than {1 / t.straggler_score:.2f}x the median time per step of its job's ranks for "
              f"{t.straggler_for} (ranklog_rank_step_seconds; relative score below {t.straggler_score:g}): every "
              f"step of the job waits for it. `ranklog triage` names the first slow step.",
              group),
        Alert("RanklogThroughputDropped",
              f"{throughput} < {keep:g} * avg_over_time({throughput}[{t.throughput_baseline}])",
              t.throughput_for, "warning", "training",
              "Throughput of job {{ $labels.training_job }} dropped on rank {{ $labels.rank }}",
              f"{THROUGHPUT_METRIC} of rank {{{{ $labels.rank }}}} of job {{{{ $labels.training_job }}}} on node "
              f"{{{{ $labels.instance }}}} is below {keep:.0%} of its average over the last "
              f"{t.throughput_baseline}.",
              group),
    ]


def _pipeline_alerts(t: Thresholds) -> list[Alert]:
    agent, archive = f'job="{AGENT_JOB}"', f'job="{ARCHIVE_JOB}"'
    rejected = f"ranklog_archive_rejected_requests_total{{{archive}}}"
    undelivered = f"ranklog_archive_verdict_delivery_failures_total{{{archive}}}"
    triage_errors = f'ranklog_archive_triage_runs_total{{{archive}, status="error"}}'
    return [
        Alert("RanklogAgentDown", f"up{{{agent}}} == 0", t.agent_down_for, "critical", "agent",
              "ranklog agent on {{ $labels.instance }} is down",
              "Prometheus cannot scrape the ranklog agent on node {{ $labels.instance }}: logs of that node "
              "are not shipped and its ranks are invisible to every other alert.", "ranklog-agent.rules"),
        Alert("RanklogShippingBacklogGrowing",
              f"ranklog_agent_backlog_bytes{{{agent}}} > {t.backlog_min_bytes}"
              f" and deriv(ranklog_agent_backlog_bytes{{{agent}}}[{t.backlog_growth_window}]) > 0",
              t.backlog_for, "warning", "agent",
              "Shipping backlog growing on {{ $labels.instance }}",
              f"The ranklog agent on node {{{{ $labels.instance }}}} holds more than {_size(t.backlog_min_bytes)} "
              f"of unshipped log data and the backlog kept growing for {t.backlog_for}: the archive is not "
              f"keeping up, and logs may be lost if files are rotated away first.", "ranklog-agent.rules"),
        Alert("RanklogOldestUnshippedTooOld",
              f"ranklog_agent_oldest_unshipped_seconds{{{agent}}} > {t.seconds('oldest_unshipped_max'):g}",
              t.oldest_unshipped_for, "critical", "agent",
              "Log data on {{ $labels.instance }} unshipped for too long",
              f"The oldest log byte on node {{{{ $labels.instance }}}} has waited more than "
              f"{t.oldest_unshipped_max} to be acknowledged by an archive: risk of log loss.",
              "ranklog-agent.rules"),
        Alert("RanklogAgentUnreadablePaths",
              f"sum by (instance, job, reason) (ranklog_agent_unreadable_paths{{{agent}}}) > 0",
              t.unreadable_paths_for, "warning", "agent",
              "ranklog agent on {{ $labels.instance }} cannot read some log paths ({{ $labels.reason }})",
              f"The ranklog agent on node {{{{ $labels.instance }}}} has been unable to read log files or "
              f"directories its sources match for {t.unreadable_paths_for} (reason {{{{ $labels.reason }}}}): "
              f"their logs are not collected. The agent's log names each path once.", "ranklog-agent.rules"),
        Alert("RanklogAgentSourceInvalid",
              f"max by (instance, job, source) (ranklog_agent_source_errors{{{agent}}}) > 0",
              t.source_errors_for, "warning", "agent",
              "ranklog agent on {{ $labels.instance }} skips a source: {{ $labels.source }} is invalid",
              "The ranklog agent on node {{ $labels.instance }} skips its configured source "
              "{{ $labels.source }} (an unknown format or preset, options its parser refuses, a relative glob): "
              "the files it names are not collected; the other sources are shipped. The agent's log says why "
              "at start; ranklog check-config finds it before a rollout.", "ranklog-agent.rules"),
        Alert("RanklogAgentRecordsLost",
              f"sum by (instance, job, reason) ({new_or_increase(f'ranklog_agent_lost_records_total{{{agent}}}', t.lost_records_window)}) > 0",
              "0m", "critical", "agent",
              "ranklog agent on {{ $labels.instance }} gave up on log records ({{ $labels.reason }})",
              f"Within {t.lost_records_window} the ranklog agent on node {{{{ $labels.instance }}}} gave up on "
              f"records (reason {{{{ $labels.reason }}}}): an archive refused them for good, even as plain text "
              f"records. The agent's log names each one's file and offset.", "ranklog-agent.rules"),
        Alert("RanklogAgentUnexpectedDuplicates",
              f"sum by (instance, job) ({new_or_increase(f'ranklog_agent_unexpected_duplicates_total{{{agent}}}', t.unexpected_duplicates_window)}) > 0",
              "0m", "critical", "agent",
              "An archive holds records under the keys of {{ $labels.instance }} that its agent never sent",
              f"Within {t.unexpected_duplicates_window} an archive answered records of node "
              f"{{{{ $labels.instance }}}} as duplicates although its agent had never sent them: another client "
              f"wrote under this node's keys (a shared token, a forged source_id) and these records were not "
              f"stored. The agent's log names the sources.", "ranklog-agent.rules"),
        Alert("RanklogAgentParseWorkerRestarted",
              f"sum by (instance, job) ({new_or_increase(f'ranklog_agent_parse_worker_restarts_total{{{agent}}}', t.parse_worker_restarts_window)}) > 0",
              "0m", "warning", "agent",
              "A parse worker of the ranklog agent on {{ $labels.instance }} died",
              f"Within {t.parse_worker_restarts_window} a parse worker process of the ranklog agent on node "
              f"{{{{ $labels.instance }}}} died and was replaced; the bytes it held were parsed by its "
              f"replacement, so no record was lost or duplicated. A worker that keeps dying stops the agent "
              f"(RanklogAgentDown follows). The agent's log has the worker's traceback or exit status.",
              "ranklog-agent.rules"),
        Alert("RanklogVerdictDeliveryFailing",
              f"sum by (instance, job, receiver) ({new_or_increase(undelivered, t.verdict_failures_window)}) > 0",
              "0m", "warning", "archive",
              "Archive {{ $labels.instance }} cannot deliver verdicts to {{ $labels.receiver }}",
              f"Within {t.verdict_failures_window} the ranklog archive {{{{ $labels.instance }}}} failed to deliver a "
              f"verdict to its receiver {{{{ $labels.receiver }}}} (refused or no answer); it retries every 30 s while "
              f"the incident is open. The archive's log names the incident and the answer.", "ranklog-archive.rules"),
        Alert("RanklogTriageFailing",
              f"sum by (instance, job) ({new_or_increase(triage_errors, t.verdict_failures_window)}) > 0",
              "0m", "warning", "archive",
              "Archive {{ $labels.instance }} failed to triage an alerted job",
              f"Within {t.verdict_failures_window} the ranklog archive {{{{ $labels.instance }}}} could not triage a "
              f"training job an alert or a suspect named, so no verdict was sent for it. The archive's log has the "
              f"error; `ranklog triage` by hand gives the verdict meanwhile.", "ranklog-archive.rules"),
        Alert("RanklogAgentNulRegions",
              f"sum by (instance, job) ({new_or_increase(f'ranklog_agent_nul_bytes_skipped_total{{{agent}}}', t.nul_regions_window)}) > 0",
              "0m", "warning", "agent",
              "ranklog agent on {{ $labels.instance }} passed over NUL-only regions of log files",
              f"Within {t.nul_regions_window} the ranklog agent on node {{{{ $labels.instance }}}} met runs of 64 KiB or "
              f"more of NUL bytes in log files it tails (sparse or preallocated files, or blocks a crash left "
              f"unwritten) and did not ship them as records. The agent's log names each file once.",
              "ranklog-agent.rules"),
        Alert("RanklogTokenFileInsecure",
              "max by (instance, job) (ranklog_token_file_insecure) > 0",
              t.token_file_insecure_for, "warning", "security",
              "The token file of {{ $labels.job }} on {{ $labels.instance }} is readable by every user",
              f"The bearer-token file that the ranklog {{{{ $labels.job }}}} on {{{{ $labels.instance }}}} reads has "
              f"been readable or writable by every user for {t.token_file_insecure_for}: any account on that "
              f"machine can use its tokens. Its log names the file; chmod 600 it.", "ranklog-security.rules"),
        Alert("RanklogArchiveDown", f"up{{{archive}}} == 0", t.archive_down_for, "critical", "archive",
              "ranklog archive {{ $labels.instance }} is down",
              "Prometheus cannot scrape the ranklog archive {{ $labels.instance }}: agents buffer in their "
              "files until it is back.", "ranklog-archive.rules"),
        Alert("RanklogArchiveRejectingIngest",
              f"sum by (instance, job, reason) ({new_or_increase(rejected, t.rejected_window)})"
              f" > {t.rejected_requests}",
              t.rejected_for, "warning", "archive",
              "Archive {{ $labels.instance }} rejects ingest ({{ $labels.reason }})",
              f"The ranklog archive {{{{ $labels.instance }}}} refused more than {t.rejected_requests} ingest "
              f"requests within {t.rejected_window} with reason {{{{ $labels.reason }}}}.",
              "ranklog-archive.rules"),
        Alert("RanklogArchiveWalCorruption",
              f"sum by (instance, job) ({new_or_increase(f'ranklog_archive_wal_corrupt_entries_total{{{archive}}}', t.wal_corruption_window)}) > 0",
              "0m", "critical", "archive",
              "Archive {{ $labels.instance }} lost acknowledged records to WAL damage",
              f"Within {t.wal_corruption_window} the ranklog archive {{{{ $labels.instance }}}} found damaged entries in "
              f"its write-ahead log at start that held acknowledged records not yet in Parquet: those records are "
              f"lost. The archive's log names the segment and byte; `ranklog integrity` lists the loss; the damaged "
              f"segment is kept in the WAL's damaged/ directory.", "ranklog-archive.rules"),
        Alert("RanklogArchiveUnreadableFiles",
              f"ranklog_archive_unreadable_files{{{archive}}} > 0",
              t.unreadable_files_for, "warning", "archive",
              "Archive {{ $labels.instance }} holds unreadable Parquet files",
              f"For {t.unreadable_files_for} the root of the ranklog archive {{{{ $labels.instance }}}} has held Parquet "
              f"files that cannot be read (empty, random, cut short): queries skip them with a warning and their "
              f"records are missing from every answer. Compaction moves them to _ranklog/quarantine/; `ranklog "
              f"integrity` lists them.", "ranklog-archive.rules"),
        Alert("RanklogArchiveDiskLow",
              f"ranklog_archive_disk_free_bytes{{{archive}}} < {t.disk_free_min_bytes}",
              t.disk_free_for, "critical", "archive",
              "Archive {{ $labels.instance }} is low on disk",
              f"The filesystem of the ranklog archive {{{{ $labels.instance }}}} has less than "
              f"{_size(t.disk_free_min_bytes)} free; at zero it answers 507 and agents stop shipping.",
              "ranklog-archive.rules"),
        Alert("RanklogRetentionNotRunning",
              f"(time() - ranklog_archive_retention_last_run_timestamp_seconds{{{archive}}})"
              f" > {t.seconds('retention_stale_after'):g}"
              f" and on(instance) min_over_time(up{{{archive}}}[{t.retention_stale_after}]) == 1",
              t.retention_for, "warning", "archive",
              "Retention is not running on archive {{ $labels.instance }}",
              f"Retention has not completed on the ranklog archive {{{{ $labels.instance }}}} for more than "
              f"{t.retention_stale_after} although the archive was up the whole time: the archive will grow "
              f"until its disk is full.", "ranklog-archive.rules"),
    ]


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} bytes"


def alerts(t: Thresholds | None = None) -> list[Alert]:
    t = t or Thresholds()
    return [*_training_alerts(t), *_signature_alerts(t), *_pipeline_alerts(t)]


def records(t: Thresholds | None = None) -> list[Record]:
    return _records(t or Thresholds())


def annotations(alert: Alert, t: Thresholds) -> dict[str, str]:
    return {"summary": alert.summary, "description": alert.description,
            "runbook_url": f"{t.runbook_url}#{runbook_anchor(alert.name)}"}


def rule_groups(t: Thresholds | None = None) -> dict[str, Any]:
    """The rule file as a mapping (groups in a stable order: recording rules first)."""
    t = t or Thresholds()
    groups: dict[str, list[dict[str, Any]]] = {}
    for rec in records(t):
        groups.setdefault(rec.group, []).append({"record": rec.name, "expr": wrap_expr(rec.expr)})
    for alert in alerts(t):
        rule: dict[str, Any] = {"alert": alert.name, "expr": wrap_expr(alert.expr)}
        if alert.for_ not in ("0s", "0m", "0"):
            rule["for"] = alert.for_
        rule["labels"] = alert.labels()
        rule["annotations"] = annotations(alert, t)
        groups.setdefault(alert.group, []).append(rule)
    intervals = {FAILURE_GROUP: t.signature_eval_interval} if t.signature_eval_interval else {}
    return {"groups": [{"name": name, **({"interval": intervals[name]} if name in intervals else {}), "rules": rules}
                       for name, rules in groups.items()]}


def render(t: Thresholds | None = None) -> str:
    from dashboards.yaml_output import dump

    header = ("# Generated by `python -m dashboards.generate` from dashboards/rules.py; do not edit.\n"
              "# Thresholds: python -m dashboards.rules --set KEY=VALUE (see dashboards/rules.py).\n")
    return dump(rule_groups(t), header)


def thresholds_from(overrides: dict[str, Any]) -> Thresholds:
    """:class:`Thresholds` with `overrides` applied; unknown keys and bad values raise UserError."""
    from ranklog.errors import ConfigError
    from ranklog.units import parse_duration, parse_size

    known = {f.name: f for f in dataclasses.fields(Thresholds)}
    values: dict[str, Any] = {}
    for key, raw in overrides.items():
        name = key.replace("-", "_")
        if name not in known:
            raise ConfigError(f"{key}: unknown threshold (known: {', '.join(sorted(known))})")
        default = known[name].default
        try:
            if name in SIZE_FIELDS:
                values[name] = parse_size(raw)
            elif isinstance(default, bool) or not isinstance(default, (int, float)):
                if name != "runbook_url" and not (name in OPTIONAL_DURATIONS and str(raw) == ""):
                    parse_duration(str(raw))  # validate; Prometheus gets the text as written
                values[name] = str(raw)
            else:
                values[name] = type(default)(raw)
        except ValueError as exc:
            raise ConfigError(f"{key}: {exc}") from None
    return dataclasses.replace(Thresholds(), **values)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m dashboards.rules",
                                     description="Render ranklog's Prometheus rules with thresholds.")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one threshold (repeatable); keys are the fields of Thresholds")
    parser.add_argument("--params", type=Path, help="YAML mapping of threshold overrides")
    parser.add_argument("-o", "--output", type=Path, help="write here instead of stdout")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from ranklog.config_loader import read_yaml
    from ranklog.errors import ConfigError, UserError

    args = _parse_args(argv)
    try:
        overrides: dict[str, Any] = read_yaml(args.params) if args.params else {}
        for item in args.set:
            key, sep, value = item.partition("=")
            if not sep:
                raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
            overrides[key.strip()] = value.strip()
        text = render(thresholds_from(overrides))
    except UserError as exc:
        print(f"dashboards.rules: error: {exc}", file=sys.stderr)
        return 2
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
