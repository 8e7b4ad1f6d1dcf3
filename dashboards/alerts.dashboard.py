"""Alerts: what fired, how often, where it came from, and who produces the errors."""

from dashboards import ERROR_LEVELS
from dashboards.panels import RANKS, RATE, Grid, build_dashboard, stat, steps, table, target, targets, timeseries

OURS = 'alertname=~"Ranklog.*"'


def firing(*matchers: str) -> str:
    """The ALERTS series of firing ranklog alerts, narrowed by extra label matchers."""
    return "ALERTS{" + ", ".join(('alertstate="firing"', OURS, *matchers)) + "}"


FIRING = firing()
FIRING_WITH_NODE = firing('instance!=""')
FIRING_WITH_RANK = firing('training_job=~"$training_job"', 'rank=~"$rank"', 'rank!=""')
ERRORS = f'ranklog_log_records_total{{level=~"{ERROR_LEVELS}", {RANKS}}}'
ALERT_COLUMNS = ("Time", "__name__", "alertstate", "Value")

grid = (
    Grid()
    .row("Now")
    .add(stat("Firing alerts", target(f"count({FIRING}) or vector(0)"), "none",
              "ranklog alerts firing right now.", thresholds=steps(("green", None), ("red", 1))), w=4)
    .add(stat("Pending alerts", target(f'count(ALERTS{{alertstate="pending", {OURS}}}) or vector(0)'), "none",
              "Alerts whose condition holds but whose `for` period has not passed yet.",
              thresholds=steps(("green", None), ("orange", 1))), w=4)
    .add(table("Firing now", [target(FIRING, "A", instant=True, table=True),
                              target(f"time() - ALERTS_FOR_STATE{{{OURS}}}", "B", instant=True, table=True)],
               "s", "Every firing ranklog alert with its labels; the value column is how long it has been active "
                    "(from ALERTS_FOR_STATE).", hide=ALERT_COLUMNS), w=16)
    .row("Over time")
    .add(timeseries("Firing alerts by name and severity",
                    targets((f"count by (alertname, severity) ({FIRING})", "{{alertname}} ({{severity}})")),
                    "none", "How many instances of each alert fired over time.", bars=True, stack=True), w=24)
    .add(timeseries("Firing alerts by node", targets((f"count by (instance) ({FIRING_WITH_NODE})",
                                                      "{{instance}}")),
                    "none", "Which nodes (agent or archive instance) the firing alerts came from.", stack=True),
         w=12)
    .add(timeseries("Firing alerts by rank",
                    targets((f"count by (training_job, rank) ({FIRING_WITH_RANK})",
                             "{{training_job}} rank {{rank}}")),
                    "none", "Which ranks of the selected jobs the firing alerts came from.", stack=True), w=12)
    .row("Error producers")
    .add(table("Top error producers (time range)",
               [target(f"topk(10, sum by (instance, training_job, rank) (increase({ERRORS}[$__range])))", instant=True,
                       table=True)],
               "short", "The ranks that logged the most ERROR/CRITICAL records over the dashboard's time range."),
         w=12)
    .add(timeseries("Error rate of the top producers",
                    targets((f"topk(5, sum by (instance, training_job, rank) (rate({ERRORS}[{RATE}])))",
                             "{{training_job}} rank {{rank}} ({{instance}})")),
                    "short", "ERROR/CRITICAL records per second of the five noisiest ranks."), w=12)
)

dashboard = build_dashboard(
    "ranklog-alerts", "ranklog / Alerts",
    "Firing ranklog alerts over time by name and severity, the nodes and ranks they came from, and the "
    "top error producers.", grid)
