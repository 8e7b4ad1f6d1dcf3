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
    Dashboard,
    DashboardLink,
    GridPos,
    RowPanel,
    Stat,
    Table,
    Target,
    Template,
    Templating,
    Time,
    TimeSeries,
)

from dashboards import AGENT_JOB, ARCHIVE_JOB, DASHBOARD_TAG, DATASOURCE_UID, DATASOURCE_VARIABLE

# Every panel and variable reads from the datasource the viewer picks (provisioned one by default).
DATASOURCE = {"type": "prometheus", "uid": f"${{{DATASOURCE_VARIABLE}}}"}
# Selectors with the dashboard variables applied.
RANKS = 'training_job=~"$training_job", instance=~"$node", rank=~"$rank"'
AGENTS = f'job="{AGENT_JOB}", instance=~"$node"'
ARCHIVES = f'job="{ARCHIVE_JOB}"'
RATE = "$__rate_interval"
GRID_WIDTH = 24


def steps(*pairs: tuple[str, float | None]) -> list[dict[str, Any]]:
    """Threshold steps: ``steps(("green", None), ("red", 80))``; the first step is the base."""
    return [{"color": color, "value": value} for color, value in pairs]


def target(expr: str, legend: str = "", ref: str = "A", instant: bool = False, table: bool = False) -> Target:
    return Target(expr=expr, legendFormat=legend, refId=ref, instant=instant, datasource=DATASOURCE,
                  format="table" if table else "time_series", intervalFactor=1)


def targets(*pairs: tuple[str, str]) -> list[Target]:
    """Several time-series queries (expr, legend) with refIds A, B, C…"""
    return [target(expr, legend, chr(ord("A") + i)) for i, (expr, legend) in enumerate(pairs)]


def timeseries(title: str, queries: list[Target], unit: str, description: str, *,
               thresholds: list[dict[str, Any]] | None = None, stack: bool = False, bars: bool = False,
               legend_calcs: list[str] | None = None) -> TimeSeries:
    return TimeSeries(
        title=title, description=description, dataSource=DATASOURCE, targets=queries, unit=unit,
        thresholds=thresholds or steps(("green", None)), thresholdsStyleMode="line" if thresholds else "off",
        stacking={"mode": "normal", "group": "A"} if stack else {},
        drawStyle="bars" if bars else "line", fillOpacity=60 if (bars or stack) else 10,
        legendDisplayMode="table" if legend_calcs else "list", legendCalcs=legend_calcs or [],
        legendPlacement="right" if legend_calcs else "bottom", tooltipMode="multi", tooltipSort="desc",
        spanNulls=True, maxDataPoints=1000,
    )


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
    """Template variables datasource (Prometheus), training_job, node (agent instance) and rank.

    "All" means ``.*``. The datasource variable defaults to the provisioned ranklog datasource; a
    Grafana without it falls back to its default Prometheus datasource.
    """
    return Templating(list=[
        Template(name=DATASOURCE_VARIABLE, label="Prometheus", query="prometheus", type="datasource",
                 default=DATASOURCE_UID, refresh=1, sort=0),
        _variable("training_job", "Training job",
                  "label_values(ranklog_last_record_timestamp_seconds, training_job)", 1),
        _variable("node", "Node", f'label_values(up{{job="{AGENT_JOB}"}}, instance)', 1),
        _variable("rank", "Rank", 'label_values(ranklog_last_record_timestamp_seconds'
                                  '{training_job=~"$training_job", instance=~"$node"}, rank)', 3),
    ])


LINKS = [DashboardLink(title="ranklog dashboards", type="dashboards", tags=[DASHBOARD_TAG], asDropdown=False,
                       includeVars=True, keepTime=True)]


def build_dashboard(uid: str, title: str, description: str, grid: Grid) -> Dashboard:
    return Dashboard(
        uid=uid, title=title, description=description, tags=[DASHBOARD_TAG], timezone="utc", refresh="30s",
        time=Time("now-3h", "now"), links=LINKS, templating=variables(), panels=grid.panels,
        graphTooltip=1, schemaVersion=39, editable=True,
    ).auto_panel_ids()
