"""Building blocks shared by the three dashboards: datasource, variables, links, panels, layout.

Every panel gets a unit and, where an alert watches the same quantity, the alert's threshold
(read from :class:`dashboards.rules.Thresholds`, so a dashboard line and the alert agree).
Panels are laid out by :class:`Grid`, which places them left to right in 24 columns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import attr
from grafanalib.core import (
    Annotations,
    Dashboard,
    DashboardLink,
    GridPos,
    Logs,
    RowPanel,
    Stat,
    Table,
    Target,
    Template,
    Templating,
    Time,
    TimeSeries,
)

from dashboards import (
    AGENT_JOB,
    ARCHIVE_JOB,
    DASHBOARD_TAG,
    DATASOURCE_UID,
    DATASOURCE_VARIABLE,
    ERROR_LEVELS,
    LOGS_DATASOURCE_UID,
    LOGS_VARIABLE,
)

# Every panel and variable reads from the datasource the viewer picks (provisioned one by default).
DATASOURCE = {"type": "prometheus", "uid": f"${{{DATASOURCE_VARIABLE}}}"}
# Selectors with the dashboard variables applied.
RANKS = 'training_job=~"$training_job", instance=~"$node", rank=~"$rank"'
AGENTS = f'job="{AGENT_JOB}", instance=~"$node"'
ARCHIVES = f'job="{ARCHIVE_JOB}"'
RATE = "$__rate_interval"
GRID_WIDTH = 24
# The archive's Loki API (the datasource in the logs variable) and its stream selector for the
# dashboard variables: the record's `job` is the training job; "All" is `.*`, which also matches
# records without a rank.
LOGS = {"type": "loki", "uid": f"${{{LOGS_VARIABLE}}}"}
LOG_STREAMS = 'job=~"$training_job", rank=~"$rank"'
ERROR_LINES = f'{{{LOG_STREAMS}, level=~"{ERROR_LEVELS}"}}'


def steps(*pairs: tuple[str, float | None]) -> list[dict[str, Any]]:
    """Threshold steps: ``steps(("green", None), ("red", 80))``; the first step is the base."""
    return [{"color": color, "value": value} for color, value in pairs]


def target(expr: str, legend: str = "", ref: str = "A", instant: bool = False, table: bool = False) -> Target:
    return Target(expr=expr, legendFormat=legend, refId=ref, instant=instant, datasource=DATASOURCE,
                  format="table" if table else "time_series", intervalFactor=1)


def targets(*pairs: tuple[str, str]) -> list[Target]:
    """Several time-series queries (expr, legend) with refIds A, B, C…"""
    return [target(expr, legend, chr(ord("A") + i)) for i, (expr, legend) in enumerate(pairs)]


def logs_target(expr: str, ref: str = "A", legend: str = "") -> dict[str, Any]:
    """A LogQL query on the archive's Loki API (a plain dict: grafanalib's Target is PromQL's)."""
    return {"refId": ref, "expr": expr, "datasource": LOGS, "queryType": "range", "editorMode": "code",
            **({"legendFormat": legend} if legend else {})}


def explore_logs_link() -> dict[str, Any]:
    """A data link from a per-rank series to Explore: that job and rank's records, in the panel's time range."""
    import json
    from urllib.parse import quote

    marks = {"JOB": "${__field.labels.training_job:percentencode}", "RANK": "${__field.labels.rank:percentencode}",
             "UID": f"${{{LOGS_VARIABLE}:percentencode}}", "FROM": "${__from}", "TO": "${__to}"}
    pane = {"ranklog": {"datasource": "@UID@", "queries": [{
        "refId": "A", "datasource": {"type": "loki", "uid": "@UID@"}, "queryType": "range", "editorMode": "code",
        "expr": '{job="@JOB@", rank="@RANK@"}'}], "range": {"from": "@FROM@", "to": "@TO@"}}}
    url = "/explore?schemaVersion=1&orgId=1&panes=" + quote(json.dumps(pane, separators=(",", ":")), safe="")
    for name, value in marks.items():
        url = url.replace(quote(f"@{name}@", safe=""), value)
    return {"title": "Logs of ${__field.labels.training_job} rank ${__field.labels.rank} (Explore)", "url": url,
            "targetBlank": False}


def timeseries(title: str, queries: list[Any], unit: str, description: str, *,
               thresholds: list[dict[str, Any]] | None = None, stack: bool = False, bars: bool = False,
               legend_calcs: list[str] | None = None, rank_links: bool = False,
               datasource: dict[str, str] | None = None) -> TimeSeries:
    """`rank_links`: series carry training_job and rank labels; link each to its logs in Explore."""
    return TimeSeries(
        title=title, description=description, dataSource=datasource or DATASOURCE, targets=queries, unit=unit,
        thresholds=thresholds or steps(("green", None)), thresholdsStyleMode="line" if thresholds else "off",
        stacking={"mode": "normal", "group": "A"} if stack else {},
        drawStyle="bars" if bars else "line", fillOpacity=60 if (bars or stack) else 10,
        legendDisplayMode="table" if legend_calcs else "list", legendCalcs=legend_calcs or [],
        legendPlacement="right" if legend_calcs else "bottom", tooltipMode="multi", tooltipSort="desc",
        spanNulls=True, maxDataPoints=1000,
        extraJson={"fieldConfig": {"defaults": {"links": [explore_logs_link()]}}} if rank_links else None,
    )


def logs(title: str, expr: str, description: str) -> Logs:
    """A logs panel on the archive's Loki API, newest first, with log details."""
    return Logs(title=title, description=description, dataSource=LOGS, targets=[logs_target(expr)], showTime=True,
                wrapLogMessages=True, sortOrder="Descending", enableLogDetails=True, showLabels=False,
                showCommonLabels=False, dedupStrategy="none", prettifyLogMessage=False)


def triage_annotation() -> dict[str, Any]:
    """Triage verdicts (``ranklog triage --annotate``) of the selected jobs, from the archive's Loki API."""
    expr = '{format="triage", job=~"$training_job"}'
    return {"name": "Triage verdicts", "datasource": LOGS, "enable": True, "hide": False, "iconColor": "red",
            "expr": expr, "target": logs_target(expr, "Anno"), "tagKeys": "job,rank,host",
            "titleFormat": "Triage verdict", "textFormat": "{{rank}} on {{host}}"}


def stat(title: str, query: Target, unit: str, description: str, *,
         thresholds: list[dict[str, Any]] | None = None, calc: str = "lastNotNull") -> Stat:
    return Stat(title=title, description=description, dataSource=DATASOURCE, targets=[query], format=unit,
                thresholds=thresholds or steps(("green", None)), reduceCalc=calc, colorMode="background",
                graphMode="area", noValue="0")


def table(title: str, queries: list[Target], unit: str, description: str, *,
          thresholds: list[dict[str, Any]] | None = None, hide: tuple[str, ...] = ("Time",)) -> Table:
    """An instant-query table; `hide` names columns to drop (the query's timestamp by default)."""
    return Table(title=title, description=description, dataSource=DATASOURCE, targets=queries, unit=unit,
                 thresholds=thresholds or steps(("green", None)), displayMode="color-background",
                 filterable=True,
                 transformations=[{"id": "merge", "options": {}},
                                  {"id": "organize", "options": {"excludeByName": dict.fromkeys(hide, True)}}])


@dataclass
class Grid:
    """Places panels left to right, wrapping at 24 columns, under optional row headers."""

    panels: list[Any] = field(default_factory=list)
    _x: int = 0
    _y: int = 0
    _row_height: int = 0

    def _wrap(self) -> None:
        if self._x:
            self._y += self._row_height
            self._x, self._row_height = 0, 0

    def row(self, title: str) -> Grid:
        self._wrap()
        self.panels.append(RowPanel(title=title, gridPos=GridPos(h=1, w=GRID_WIDTH, x=0, y=self._y)))
        self._y += 1
        return self

    def add(self, panel: Any, w: int = 12, h: int = 8) -> Grid:
        if self._x + w > GRID_WIDTH:
            self._wrap()
        self.panels.append(attr.evolve(panel, gridPos=GridPos(h=h, w=w, x=self._x, y=self._y)))
        self._x += w
        self._row_height = max(self._row_height, h)
        return self


def _variable(name: str, label: str, query: str, sort: int) -> Template:
    return Template(name=name, label=label, query=query, dataSource=DATASOURCE, includeAll=True, multi=True,
                    allValue=".*", default="$__all", refresh=2, sort=sort)


def variables() -> Templating:
    """Template variables datasource (Prometheus), logs (Loki: the archive), training_job, node (agent instance), rank.

    "All" means ``.*``. The datasource variable defaults to the provisioned ranklog datasource; a
    Grafana without it falls back to its default Prometheus datasource.
    """
    return Templating(list=[
        Template(name=DATASOURCE_VARIABLE, label="Prometheus", query="prometheus", type="datasource",
                 default=DATASOURCE_UID, refresh=1, sort=0),
        Template(name=LOGS_VARIABLE, label="Logs", query="loki", type="datasource",
                 default=LOGS_DATASOURCE_UID, refresh=1, sort=0),
        _variable("training_job", "Training job",
                  "label_values(ranklog_last_record_timestamp_seconds, training_job)", 1),
        _variable("node", "Node", f'label_values(up{{job="{AGENT_JOB}"}}, instance)', 1),
        _variable("rank", "Rank", 'label_values(ranklog_last_record_timestamp_seconds'
                                  '{training_job=~"$training_job", instance=~"$node"}, rank)', 3),
    ])


LINKS = [DashboardLink(title="ranklog dashboards", type="dashboards", tags=[DASHBOARD_TAG], asDropdown=False,
                       includeVars=True, keepTime=True)]


def build_dashboard(uid: str, title: str, description: str, grid: Grid,
                    annotations: list[dict[str, Any]] | None = None) -> Dashboard:
    return Dashboard(
        uid=uid, title=title, description=description, tags=[DASHBOARD_TAG], timezone="utc", refresh="30s",
        time=Time("now-3h", "now"), links=LINKS, templating=variables(), panels=grid.panels,
        annotations=Annotations(list=annotations or []),
        graphTooltip=1, schemaVersion=39, editable=True,
    ).auto_panel_ids()
