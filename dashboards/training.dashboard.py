"""Training: is the job making progress, and which rank is behind, silent or diverging?"""

from dashboards import (
    GRAD_NORM_METRICS,
    LOSS_METRICS,
    STEP_TIME_METRIC,
    THROUGHPUT_METRIC,
    TOKENS_PER_SECOND_METRIC,
)
from dashboards.panels import (
    ERROR_LINES,
    LOG_STREAMS,
    LOGS,
    RANKS,
    Grid,
    build_dashboard,
    logs,
    logs_target,
    stat,
    steps,
    table,
    target,
    targets,
    timeseries,
    triage_annotation,
)
from dashboards.rules import Thresholds

T = Thresholds()
SILENT_AFTER = T.seconds("silent_after")
FRESH = T.seconds("others_fresh_within")
STALL_MIN = T.seconds("stall_min")
KEEP = 1 - T.throughput_drop_fraction


def metric(names: str | tuple[str, ...]) -> str:
    """``ranklog_training_metric`` for one allow-listed name, or any of several."""
    if isinstance(names, str):
        return f'ranklog_training_metric{{name="{names}", {RANKS}}}'
    return f'ranklog_training_metric{{name=~"{"|".join(names)}", {RANKS}}}'


since_last_record = f"time() - ranklog_last_record_timestamp_seconds{{{RANKS}}}"
since_step_advanced = (f"time() - max_over_time(ranklog:training_step_advanced_timestamp_seconds{{{RANKS}}}"
                       f"[{T.stall_lookback}])")
silence_steps = steps(("green", None), ("yellow", FRESH), ("red", SILENT_AFTER))

grid = (
    Grid()
    .row("Throughput")
    .add(timeseries(
        "Throughput (perf/throughput)",
        targets((metric(THROUGHPUT_METRIC), "{{training_job}} rank {{rank}}"),
                (f"{KEEP:g} * avg_over_time({metric(THROUGHPUT_METRIC)}[{T.throughput_baseline}])",
                 "alert below ({{training_job}} rank {{rank}})")),
        "short", f"Tokens per second per GPU as logged by the job. The second line is the alert level: "
                 f"{KEEP:.0%} of the {T.throughput_baseline} average (RanklogThroughputDropped).",
        rank_links=True), w=12)
    .add(timeseries(
        "Tokens per second (job)",
        targets((f"sum by (training_job) ({metric(TOKENS_PER_SECOND_METRIC)})", "{{training_job}}"),
                (f"sum by (training_job) ({metric(THROUGHPUT_METRIC)})", "{{training_job}} (sum of perf/throughput)")),
        "short", f"Tokens the whole job processes per second: {TOKENS_PER_SECOND_METRIC} as logged, and the sum "
                 f"of the per-GPU {THROUGHPUT_METRIC} over the ranks that log it."), w=8)
    .add(stat("Ranks reporting", target(f"count(ranklog_last_record_timestamp_seconds{{{RANKS}}})"), "none",
              "Ranks that have written at least one record (any job selected)."), w=4)
    .row("Steps")
    .add(timeseries(
        "Step time",
        targets((metric(STEP_TIME_METRIC), "logged {{training_job}} rank {{rank}}"),
                (f"ranklog:training_step_seconds:recent{{{RANKS}}}",
                 f"{T.step_time_window} average {{{{training_job}}}} rank {{{{rank}}}}")),
        "s", f"{STEP_TIME_METRIC} as logged, and the step time derived from step progress over "
             f"{T.step_time_window} (what RanklogTrainingStalled compares against).", rank_links=True), w=12)
    .add(timeseries(
        "Step time per rank", targets((f"ranklog_rank_step_seconds{{{RANKS}}}", "{{training_job}} rank {{rank}}")),
        "s", "Each rank's own time per step: its compute/step duration field when its records carry one, else the "
             "time between its step advances. Click a series for that rank's logs.", rank_links=True), w=12)
    .add(timeseries(
        "Step time against the job median",
        targets((f"ranklog_rank_step_seconds{{{RANKS}}} / on(training_job) group_left() "
                 f"quantile by (training_job) (0.5, ranklog_rank_step_seconds{{{RANKS}}})",
                 "{{training_job}} rank {{rank}}")),
        "none", f"1 = as fast as the job's median rank. Above {1 / T.straggler_score:.2f} (red) for "
                f"{T.straggler_for}, RanklogStraggler fires: every step of the job waits for that rank.",
        thresholds=steps(("green", None), ("red", round(1 / T.straggler_score, 2))), rank_links=True), w=12)
    .add(timeseries("Step per rank", targets((f"ranklog_training_step{{{RANKS}}}", "{{training_job}} rank {{rank}}")),
                    "none", "Latest training step of every rank: a lagging or stalled rank is a flat line. "
                            "Click a series for that rank's logs in Explore.", rank_links=True),
         w=12)
    .add(timeseries(
        "Steps behind the leading rank",
        targets((f"max by (training_job) (ranklog_training_step{{{RANKS}}}) - on(training_job) group_right() "
                 f"ranklog_training_step{{{RANKS}}}", "{{training_job}} rank {{rank}}")),
        "none", "How many steps each rank is behind the most advanced rank of its job (0 = in step).",
        thresholds=steps(("green", None), ("yellow", 1), ("red", 10)), rank_links=True), w=12)
    .add(table(
        "Seconds since the step last advanced",
        [target(f"sort_desc({since_step_advanced})", instant=True, table=True)],
        "s", f"Per rank; RanklogTrainingStalled fires past {T.stall_factor:g}× the recent step time "
             f"(at least {T.stall_min}).",
        thresholds=steps(("green", None), ("yellow", STALL_MIN / 2), ("red", STALL_MIN))), w=12)
    .row("Loss and gradients")
    .add(timeseries("Loss per rank", targets((metric(LOSS_METRICS), "{{name}} {{training_job}} rank {{rank}}")),
                    "none", f"Loss metrics logged by each rank ({', '.join(LOSS_METRICS)}).", rank_links=True), w=12)
    .add(timeseries("Grad norm per rank",
                    targets((metric(GRAD_NORM_METRICS), "{{name}} {{training_job}} rank {{rank}}")),
                    "none", f"Gradient norms logged by each rank ({', '.join(GRAD_NORM_METRICS)}).",
                    rank_links=True), w=12)
    .row("Silent ranks")
    .add(stat("Silent ranks", target(f"count(({since_last_record}) > {SILENT_AFTER:g}) or vector(0)"), "none",
              f"Ranks with no record for more than {T.silent_after} (RanklogRankSilent fires when other ranks of "
              "the job are still logging).", thresholds=steps(("green", None), ("red", 1))), w=4)
    .add(table("Seconds since last record, by rank",
               [target(f"sort_desc({since_last_record})", instant=True, table=True)], "s",
               "Event time of each rank's newest record, as an age.", thresholds=silence_steps), w=8)
    .add(timeseries("Seconds since last record", targets((since_last_record, "{{training_job}} rank {{rank}}")), "s",
                    "A rank whose line climbs while the others stay low went silent. Click it for its last records.",
                    thresholds=silence_steps, rank_links=True), w=12)
    .row("Logs (archive)")
    .add(timeseries(
        "Log records by level (archive)",
        [logs_target(f"sum by (level) (count_over_time({{{LOG_STREAMS}}} [$__interval]))", legend="{{level}}")],
        "short", "Records of the selected jobs and ranks per interval, by level, counted by the archive's Loki API "
                 "(the records themselves, not the agent's counters).", stack=True, bars=True, datasource=LOGS), w=24)
    .add(logs("Errors of the selected jobs and ranks", ERROR_LINES,
              "ERROR and CRITICAL records from the archive (newest first), tracebacks included; expand a line for "
              "its labels. Triage verdicts show as red annotations."), w=24, h=12)
)

dashboard = build_dashboard(
    "ranklog-training", "ranklog / Training",
    "Throughput, step progress, loss and silence per rank of the selected training jobs, with their logs.", grid,
    annotations=[triage_annotation()])
