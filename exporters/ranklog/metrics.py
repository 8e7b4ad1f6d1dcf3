"""Every Prometheus metric ranklog exports, once.

Dashboards and alert rules (``dashboards/``) may only use names listed in :data:`METRICS`; a test
scrapes a live agent and archive to prove each of them is exported. Components create their
metric objects with :func:`create` so that several instances (tests, the demo) can live in one
process with their own registries.

The training job id is the label ``training_job`` (the record's ``job`` column), never ``job``: that
label belongs to the operator's Prometheus scrape config, so no ``honor_labels`` is needed.

Label cardinality is bounded by :class:`LabelBudget`: at most ``max_jobs`` distinct `training_job` values and
``max_ranks`` distinct `rank` values per job (defaults 32 and 8192) and ``max_names`` training metric
names; values past the budget are reported as ``other`` and counted in
``ranklog_metric_label_overflow_total``, so a runaway job cannot blow up Prometheus.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry


@dataclass(frozen=True)
class MetricSpec:
    name: str  # the exposed name (counters with their `_total` suffix)
    kind: str  # counter | gauge | histogram
    help: str
    labels: tuple[str, ...] = ()
    component: str = "agent"  # agent | archive | run (the `ranklog run` wrapper) | all
    buckets: tuple[float, ...] | None = None


_FLUSH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

_SPECS: tuple[MetricSpec, ...] = (
    # Read from the logs (agent; `ranklog run --monitoring-port` exports the record ones too).
    MetricSpec("ranklog_log_records_total", "counter", "Log records read, by normalized level.", ("level", "training_job", "rank"), "run"),
    MetricSpec("ranklog_last_record_timestamp_seconds", "gauge", "Event time of the newest record of a rank.", ("training_job", "rank"), "run"),
    MetricSpec("ranklog_failure_signatures_total", "counter", "Records matching a known failure signature.", ("signature", "training_job", "rank"), "run"),
    MetricSpec("ranklog_failure_signature_last_timestamp_seconds", "gauge",
               "Event time of the newest record matching a failure signature (an alert on it fires at the first "
               "scrape, with no history needed).", ("signature", "training_job", "rank"), "run"),
    MetricSpec("ranklog_training_step", "gauge", "Latest training step logged by a rank.", ("training_job", "rank"), "run"),
    MetricSpec("ranklog_training_metric", "gauge", "Latest value of an allow-listed training metric.", ("training_job", "rank", "name"), "run"),
    MetricSpec("ranklog_rank_step_seconds", "gauge",
               "A rank's own recent time per training step: a duration field of its records (compute_time, "
               "step_time, ...; compute-like first) when they carry one, else the time between its step advances.",
               ("training_job", "rank"), "run"),
    MetricSpec("ranklog_metric_label_overflow_total", "counter", "Label values folded into 'other' by the cardinality budget.", ("label",), "run"),
    # Agent pipeline.
    MetricSpec("ranklog_agent_bytes_read_total", "counter", "Bytes read from log files."),
    MetricSpec("ranklog_agent_reads_total", "counter",
               "Reads of log files that got bytes (bytes read / reads: what one parse, summary and encoding share)."),
    MetricSpec("ranklog_agent_records_shipped_total", "counter", "Records acknowledged by an archive."),
    MetricSpec("ranklog_agent_ship_failures_total", "counter", "Failed shipping attempts, by reason.", ("reason",)),
    MetricSpec("ranklog_agent_backlog_bytes", "gauge", "Bytes written to tracked files and not yet acknowledged."),
    MetricSpec("ranklog_agent_oldest_unshipped_seconds", "gauge", "Age of the oldest byte not yet acknowledged."),
    MetricSpec("ranklog_agent_parse_errors_total", "counter", "Lines kept as text records because their format did not parse.", ("format",)),
    MetricSpec("ranklog_agent_files_tracked", "gauge", "Files the agent is currently tailing."),
    MetricSpec("ranklog_agent_unreadable_paths", "gauge",
               "Paths matched by a source (or directories that may hold matches) the agent cannot read, by reason "
               "(permission, missing, not_a_file, error); each is named once in the agent's log.", ("reason",)),
    MetricSpec("ranklog_agent_source_errors", "gauge",
               "Configured sources (and presets) the agent skips because a value is invalid: an unknown format or "
               "preset, options the parser refuses, a relative glob; 1 per source, labelled with its config key "
               "(sources[2], source[0], preset:NAME). Each is named once in the agent's log at start; the other "
               "sources are shipped.", ("source",)),
    MetricSpec("ranklog_agent_lost_bytes_total", "counter", "Bytes that vanished before they were shipped (file deleted or truncated).", ("reason",)),
    MetricSpec("ranklog_agent_nul_bytes_skipped_total", "counter",
               "Bytes of NUL-only regions (64 KiB or more: sparse or preallocated files, blocks a crash left "
               "unwritten) passed over instead of shipped as records."),
    MetricSpec("ranklog_agent_recreated_files_total", "counter",
               "Checkpointed files found again at start with the same inode and first bytes but another birth time "
               "or other acknowledged bytes: deleted and recreated while the agent was down, read from byte 0."),
    MetricSpec("ranklog_agent_quarantined_records_total", "counter", "Records an archive refused for good, re-sent as text records with attrs.ship_error."),
    MetricSpec("ranklog_agent_unexpected_duplicates_total", "counter",
               "Records an archive answered as duplicates that this agent never sent before: another client holds "
               "data under this node's keys (shared token, forged source_id); they were not stored."),
    MetricSpec("ranklog_agent_lost_records_total", "counter", "Records given up on: refused by the archive even as a text record.", ("reason",)),
    MetricSpec("ranklog_agent_reading_paused", "gauge", "1 while reading is paused because the archive cannot keep up."),
    MetricSpec("ranklog_agent_ship_seconds", "histogram", "Time from send to acknowledgement of a batch.", buckets=_FLUSH_BUCKETS),
    MetricSpec("ranklog_agent_parse_workers", "gauge", "Parse worker processes (parse_workers; 1 = the reading thread parses)."),
    MetricSpec("ranklog_agent_parse_worker_busy_seconds_total", "counter",
               "Seconds spent parsing, by worker ('0', '1', …; 'reader' when the reading thread parses).", ("worker",)),
    MetricSpec("ranklog_agent_parse_worker_restarts_total", "counter", "Parse worker processes that died and were replaced."),
    MetricSpec("ranklog_agent_parse_files_moved_total", "counter",
               "Files handed from one parse worker to a less busy one between two of their pieces."),
    MetricSpec("ranklog_agent_queue_depth", "gauge",
               "Items waiting in the agent's pipeline, by queue: parse (pieces sent to parse workers, unanswered), "
               "observe (batches for the metrics thread), ship (requests waiting for a sender).", ("queue",)),
    MetricSpec("ranklog_agent_suspects_total", "counter",
               "Failure lines pushed to an archive's /v1/alerts as suspects (the verdict without waiting for a scrape), "
               "by result: sent, failed (no archive took it), skipped (its job had one within suspect_interval).",
               ("result",)),
    # Archive.
    MetricSpec("ranklog_archive_ingested_records_total", "counter", "Records durably accepted (after dedup).", component="archive"),
    MetricSpec("ranklog_archive_ingested_bytes_total", "counter", "Request body bytes accepted.", component="archive"),
    MetricSpec("ranklog_archive_repaired_records_total", "counter", "Records stored with unusable values (out of range, wrong type, not a time) moved to attrs.parse_error.", component="archive"),
    MetricSpec("ranklog_archive_duplicate_records_total", "counter", "Re-sent records acknowledged but not stored again.", component="archive"),
    MetricSpec("ranklog_archive_rejected_requests_total", "counter", "Requests refused, by reason.", ("reason",), "archive"),
    MetricSpec("ranklog_archive_refused_records_total", "counter",
               "Records in requests refused for what they hold, by reason (host_not_allowed: a token bound to a "
               "node identity sent records of a host it may not write).", ("reason",), "archive"),
    MetricSpec("ranklog_archive_ingest_memory_bytes", "gauge",
               "Memory charged to ingest requests in flight (bodies, decoded data, records), against "
               "ingest_memory_budget.", component="archive"),
    MetricSpec("ranklog_archive_wal_bytes", "gauge", "Bytes in the write-ahead log not yet flushed to Parquet.", component="archive"),
    MetricSpec("ranklog_archive_stored_bytes", "gauge", "Bytes of Parquet files under the archive root.", component="archive"),
    MetricSpec("ranklog_archive_stored_files", "gauge", "Parquet files under the archive root.", component="archive"),
    MetricSpec("ranklog_archive_unreadable_files", "gauge",
               "Parquet files under the archive root that are not readable: in place (readers skip them) or "
               "moved to _ranklog/quarantine/ by compaction; ranklog integrity lists them.", component="archive"),
    MetricSpec("ranklog_archive_oldest_partition_timestamp_seconds", "gauge", "Start of the oldest hour partition kept.", component="archive"),
    MetricSpec("ranklog_archive_disk_free_bytes", "gauge", "Free bytes on the archive's filesystem.", component="archive"),
    MetricSpec("ranklog_archive_flush_seconds", "histogram", "Time to flush WAL data to a Parquet file.", component="archive", buckets=_FLUSH_BUCKETS),
    MetricSpec("ranklog_archive_flush_failures_total", "counter",
               "Flushes to Parquet that failed (object store unreachable, disk error); the rows stay in the WAL "
               "and are retried.", component="archive"),
    MetricSpec("ranklog_archive_wal_corrupt_entries_total", "counter",
               "Acknowledged write-ahead log entries lost to damage found at replay (each also stored as a loss "
               "notice that ranklog integrity reports).", component="archive"),
    MetricSpec("ranklog_archive_wal_corrupt_records_total", "counter",
               "Records in the lost WAL entries whose headers survived (a lower bound).", component="archive"),
    MetricSpec("ranklog_archive_wal_corrupt_bytes_total", "counter", "Bytes of damaged WAL regions that held "
               "acknowledged entries.", component="archive"),
    MetricSpec("ranklog_archive_compactions_total", "counter", "Hour partitions compacted.", component="archive"),
    MetricSpec("ranklog_archive_hour_leases_total", "counter",
               "Hour leases for compaction/retention by outcome: acquired, takeover, busy, lost.", ("outcome",),
               "archive"),
    MetricSpec("ranklog_archive_retention_deleted_files_total", "counter", "Files (or row groups) deleted by retention.", ("level",), "archive"),
    MetricSpec("ranklog_archive_retention_last_run_timestamp_seconds", "gauge", "When retention last completed.", component="archive"),
    MetricSpec("ranklog_archive_dedup_sources", "gauge", "Sources tracked in the dedup index.", component="archive"),
    MetricSpec("ranklog_archive_dedup_ranges", "gauge",
               "Contiguous stored-key ranges the dedup index holds (its memory: 24 bytes each).", component="archive"),
    MetricSpec("ranklog_archive_alert_notifications_total", "counter",
               "Notifications received on /v1/alerts, by source (alertmanager, agent).", ("source",), "archive"),
    MetricSpec("ranklog_archive_triage_runs_total", "counter",
               "Triage runs for incidents, by the verdict's status (failure, degraded, no failure, no data) or error.",
               ("status",), "archive"),
    MetricSpec("ranklog_archive_triage_seconds", "histogram", "Time to triage an incident's job (read, judge, report).",
               component="archive", buckets=_FLUSH_BUCKETS),
    MetricSpec("ranklog_archive_verdicts_sent_total", "counter",
               "Verdicts delivered to a receiver, by receiver and kind (verdict: the incident's first; update).",
               ("receiver", "kind"), "archive"),
    MetricSpec("ranklog_archive_verdict_delivery_failures_total", "counter",
               "Verdict deliveries a receiver refused or did not answer (retried at the next trigger).", ("receiver",),
               "archive"),
    MetricSpec("ranklog_archive_verdict_latency_seconds", "histogram",
               "Time from an incident's first trigger (alert or suspect) to its first verdict delivered.",
               component="archive", buckets=(0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120, 300)),
    MetricSpec("ranklog_archive_open_incidents", "gauge", "Training jobs with an open incident (a verdict kept up to date).",
               component="archive"),
    # Both.
    MetricSpec("ranklog_token_file_insecure", "gauge",
               "1 while the token file this agent or archive reads is readable or writable by every user "
               "(chmod 600 it); the file is still used.", component="all"),
    MetricSpec("ranklog_build_info", "gauge", "Version of the running ranklog component (always 1).",
               ("version", "component", "python", "pyarrow"), "all"),
)

METRICS: dict[str, MetricSpec] = {spec.name: spec for spec in _SPECS}


def _attribute(spec: MetricSpec) -> str:
    name = spec.name.removeprefix("ranklog_")
    return name.removesuffix("_total") if spec.kind == "counter" else name


def create(component: str, registry: CollectorRegistry | None = None) -> SimpleNamespace:
    """Create the metric objects of one component in `registry` (a new one when None).

    `component` is `agent`, `archive` or `run`; the agent also gets the `run` metrics (records read
    from logs). The result has one attribute per metric (name without `ranklog_` and `_total`) and
    `registry`.
    """
    import platform

    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, PlatformCollector, ProcessCollector

    from . import __version__

    registry = registry if registry is not None else CollectorRegistry()
    wanted = {"agent": {"agent", "run", "all"}, "archive": {"archive", "all"}, "run": {"run", "all"}}[component]
    out = SimpleNamespace(registry=registry)
    for spec in _SPECS:
        if spec.component not in wanted:
            continue
        base = spec.name.removesuffix("_total") if spec.kind == "counter" else spec.name
        if spec.kind == "counter":
            metric = Counter(base, spec.help, spec.labels, registry=registry)
        elif spec.kind == "gauge":
            metric = Gauge(base, spec.help, spec.labels, registry=registry)
        else:
            metric = Histogram(base, spec.help, spec.labels, registry=registry, buckets=spec.buckets or _FLUSH_BUCKETS)
        setattr(out, _attribute(spec), metric)
    out.build_info.labels(version=__version__, component=component, python=platform.python_version(),
                          pyarrow=_version_of("pyarrow")).set(1)
    if component in ("agent", "archive"):
        # process_* (CPU, memory, open fds, start time) and python_info, as every Prometheus exporter has
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
    return out


def _version_of(distribution: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return ""


class LabelBudget:
    """Bounds label cardinality: past the budget a value becomes ``other`` (counted, never silent)."""

    OTHER = "other"

    def __init__(self, overflow_counter=None, max_jobs: int = 32, max_ranks: int = 8192, max_names: int = 64) -> None:
        self._limits = {"training_job": max_jobs, "rank": max_ranks, "name": max_names}
        self._seen: dict[str, set[str]] = {key: set() for key in self._limits}
        self._overflow = overflow_counter
        self._lock = threading.Lock()

    def __call__(self, label: str, value: object) -> str:
        text = "" if value is None else str(value)
        seen = self._seen[label]
        if text in seen:
            return text
        with self._lock:
            if len(seen) < self._limits[label]:
                seen.add(text)
                return text
        if self._overflow is not None:
            self._overflow.labels(label=label).inc()
        return self.OTHER
