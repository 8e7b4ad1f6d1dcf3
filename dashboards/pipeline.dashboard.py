"""Log pipeline: how much each node logs, how errors spread, and whether agents and archive keep up."""

from dashboards import ERROR_LEVELS
from dashboards.panels import (
    AGENTS,
    ARCHIVES,
    RANKS,
    RATE,
    Grid,
    build_dashboard,
    stat,
    steps,
    table,
    target,
    targets,
    timeseries,
)
from dashboards.rules import Thresholds

T = Thresholds()
ERRORS = f'level=~"{ERROR_LEVELS}", {RANKS}'
BURST_RATE = T.error_burst_errors / T.seconds("error_burst_window")  # the error-burst alert, per second


def rate(metric: str, selector: str, by: str) -> str:
    return f"sum by ({by}) (rate({metric}{{{selector}}}[{RATE}]))"


def p95(histogram: str, selector: str) -> str:
    return f"histogram_quantile(0.95, sum by (instance, le) (rate({histogram}_bucket{{{selector}}}[{RATE}])))"


grid = (
    Grid()
    .row("Log traffic")
    .add(timeseries("Bytes read per node", targets((rate("ranklog_agent_bytes_read_total", AGENTS, "instance"),
                                                    "{{instance}}")),
                    "Bps", "Bytes the agent of each node reads from log files.", stack=True), w=8)
    .add(timeseries("Records per second per node",
                    targets((rate("ranklog_log_records_total", RANKS, "instance"), "{{instance}}")),
                    "short", "Log records read on each node, all levels.", stack=True), w=8)
    .add(table("Share of records by node (time range)",
               [target(f"sort_desc(sum by (instance) (increase(ranklog_log_records_total{{{RANKS}}}[$__range])))",
                       instant=True, table=True)],
               "short", "Records per node over the dashboard's time range: the distribution across nodes."),
         w=8)
    .add(timeseries("Records by level", targets((rate("ranklog_log_records_total", RANKS, "level"), "{{level}}")),
                    "short", "Records per second by normalized level.", stack=True), w=12)
    .add(timeseries("Parse errors and lost bytes",
                    targets((rate("ranklog_agent_parse_errors_total", AGENTS, "instance, format"),
                             "parse errors {{instance}} {{format}}"),
                            (rate("ranklog_agent_lost_bytes_total", AGENTS, "instance, reason"),
                             "lost bytes {{instance}} {{reason}}"),
                            (f"sum by (instance, reason) (ranklog_agent_unreadable_paths{{{AGENTS}}})",
                             "unreadable paths {{instance}} {{reason}}")),
                    "short", "Lines kept as text because their format did not parse, bytes that vanished "
                             "before shipping (file deleted or truncated), and paths the agent cannot read "
                             "(named in its log) — all should stay at zero."), w=12)
    .row("Errors")
    .add(timeseries("Error rate per node", targets((rate("ranklog_log_records_total", ERRORS, "instance"),
                                                    "{{instance}}")),
                    "short", "ERROR and CRITICAL records per second on each node."), w=12)
    .add(timeseries("Error rate per rank", targets((rate("ranklog_log_records_total", ERRORS, "instance, training_job, rank"),
                                                    "{{training_job}} rank {{rank}} ({{instance}})")),
                    "short", f"ERROR and CRITICAL records per second of each rank; the line is the "
                             f"RanklogErrorBurst level ({T.error_burst_errors} in {T.error_burst_window}).",
                    thresholds=steps(("green", None), ("red", round(BURST_RATE, 4)))), w=12)
    .add(timeseries("Failure signatures over time",
                    targets((f"sum by (signature) (increase(ranklog_failure_signatures_total{{{RANKS}}}[{RATE}]))",
                             "{{signature}}")),
                    "short", "Records matching a known failure signature (ranklog.signatures).", bars=True,
                    stack=True), w=12)
    .add(table("Failure signatures by rank",
               [target(f"sort_desc(sum by (instance, training_job, rank, signature) "
                       f"(ranklog_failure_signatures_total{{{RANKS}}}))", instant=True, table=True)],
               "short", "Total matches per rank and signature since each agent started.",
               thresholds=steps(("green", None), ("red", 1))), w=12)
    .row("Agents")
    .add(stat("Agents down", target(f"count(up{{{AGENTS}}} == 0) or vector(0)"), "none",
              "Agents Prometheus cannot scrape (RanklogAgentDown).", thresholds=steps(("green", None), ("red", 1))),
         w=4)
    .add(stat("Files tracked", target(f"sum(ranklog_agent_files_tracked{{{AGENTS}}})"), "none",
              "Files the selected agents are tailing."), w=4)
    .add(timeseries("Agent backlog", targets((f"ranklog_agent_backlog_bytes{{{AGENTS}}}", "{{instance}}")), "bytes",
                    f"Bytes written to tracked files and not yet acknowledged; RanklogShippingBacklogGrowing "
                    f"fires above {T.backlog_min_bytes} bytes while it keeps growing.",
                    thresholds=steps(("green", None), ("red", T.backlog_min_bytes))), w=8)
    .add(timeseries("Oldest unshipped", targets((f"ranklog_agent_oldest_unshipped_seconds{{{AGENTS}}}",
                                                 "{{instance}}")), "s",
                    f"Age of the oldest byte not yet acknowledged (RanklogOldestUnshippedTooOld above "
                    f"{T.oldest_unshipped_max}).",
                    thresholds=steps(("green", None), ("red", T.seconds("oldest_unshipped_max")))), w=8)
    .add(timeseries("Shipping", targets((rate("ranklog_agent_records_shipped_total", AGENTS, "instance"),
                                         "shipped {{instance}}"),
                                        (rate("ranklog_agent_ship_failures_total", AGENTS, "instance, reason"),
                                         "failed {{instance}} {{reason}}")),
                    "short", "Records acknowledged by an archive per second, and failed shipping attempts."), w=8)
    .add(timeseries("Ship latency p95", targets((p95("ranklog_agent_ship_seconds", AGENTS), "{{instance}}")), "s",
                    "95th percentile of the time from sending a batch to its acknowledgement."), w=8)
    .add(timeseries("Reading paused", targets((f"ranklog_agent_reading_paused{{{AGENTS}}}", "{{instance}}")),
                    "bool_yes_no", "1 while an agent pauses reading because the archive cannot keep up.",
                    thresholds=steps(("green", None), ("orange", 1))), w=8)
    .add(timeseries("Parse workers busy", targets(
        (rate("ranklog_agent_parse_worker_busy_seconds_total", AGENTS, "instance, worker"), "{{instance}} {{worker}}"),
        (f"ranklog_agent_parse_workers{{{AGENTS}}}", "workers {{instance}}")), "short",
        "Cores' worth of parsing per worker (1 = a worker parses all the time: the node logs faster than it "
        "parses, more parse_workers would help if CPUs are free), and the number of workers."), w=8)
    .add(timeseries("Pipeline queues", targets((f"ranklog_agent_queue_depth{{{AGENTS}}}", "{{instance}} {{queue}}")),
                    "short", "Items waiting in each agent's pipeline: pieces with the parse workers, batches for "
                             "the metrics thread, requests for the senders. Full parse queues with idle senders "
                             "mean parsing is the bottleneck; a full ship queue means the archive is."), w=8)
    .add(timeseries("Bytes per read", targets((f"{rate('ranklog_agent_bytes_read_total', AGENTS, 'instance')} / "
                                               f"{rate('ranklog_agent_reads_total', AGENTS, 'instance')}",
                                               "{{instance}}")), "bytes",
                    "Mean bytes a read of a log file got. Each read pays a parse, a metrics summary and an "
                    "encoding with ~1–2 ms of set-up costs, so small reads on a node mean its agent's CPU "
                    "goes to them, not to its lines: tail_interval sets how often a file being written is "
                    "read (bench_trickle.py)."), w=8)
    .row("Archive")
    .add(timeseries("Archive ingest", targets((rate("ranklog_archive_ingested_records_total", ARCHIVES, "instance"),
                                               "ingested {{instance}}"),
                                              (rate("ranklog_archive_duplicate_records_total", ARCHIVES, "instance"),
                                               "duplicates {{instance}}")),
                    "short", "Records durably accepted per second, and re-sent records acknowledged without "
                             "being stored again."), w=8)
    .add(timeseries("Rejected requests", targets((rate("ranklog_archive_rejected_requests_total", ARCHIVES,
                                                       "instance, reason"), "{{instance}} {{reason}}")),
                    "reqps", "Ingest requests refused, by reason (RanklogArchiveRejectingIngest).",
                    thresholds=steps(("green", None), ("red", 0.001))), w=8)
    .add(timeseries("Flush latency p95", targets((p95("ranklog_archive_flush_seconds", ARCHIVES), "{{instance}}")),
                    "s", "95th percentile of the time to flush WAL data to a Parquet file."), w=8)
    .add(timeseries("Stored bytes", targets((f"ranklog_archive_stored_bytes{{{ARCHIVES}}}", "parquet {{instance}}"),
                                            (f"ranklog_archive_wal_bytes{{{ARCHIVES}}}", "wal {{instance}}")),
                    "bytes", "Bytes of Parquet files under the archive root, and WAL bytes not yet flushed."), w=8)
    .add(timeseries("Free disk", targets((f"ranklog_archive_disk_free_bytes{{{ARCHIVES}}}", "{{instance}}")),
                    "bytes", f"Free bytes on the archive's filesystem (RanklogArchiveDiskLow below "
                             f"{T.disk_free_min_bytes} bytes).",
                    thresholds=steps(("red", None), ("green", T.disk_free_min_bytes))), w=8)
    .add(timeseries("Age of the oldest partition",
                    targets((f"time() - ranklog_archive_oldest_partition_timestamp_seconds{{{ARCHIVES}}}",
                             "oldest partition {{instance}}"),
                            (f"time() - ranklog_archive_retention_last_run_timestamp_seconds{{{ARCHIVES}}}",
                             "since retention ran {{instance}}")),
                    "s", f"Retention at work: the oldest hour kept should level off at the retention period; "
                         f"RanklogRetentionNotRunning fires when retention has not run for "
                         f"{T.retention_stale_after}."), w=8)
)

dashboard = build_dashboard(
    "ranklog-pipeline", "ranklog / Log pipeline",
    "Log traffic per node, errors and failure signatures, agent shipping and archive health.", grid)
