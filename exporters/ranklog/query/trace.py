"""``ranklog trace ID``: every record of one trace across nodes, in time order, with the time between
consecutive records so a slow hop stands out.

The timeline lists records by ``ts`` (ties broken by host, source, offset); a *hop* is a step where
the node/rank changes. Each row carries the time since the previous record of the trace (any node)
and since the previous record of the same node/rank. Per node/rank the summary gives the count, the
first and last time and its largest internal gap; the slowest step of the whole trace is named.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ..errors import UserError
from ..record import ts_ns
from . import engine
from .filters import QuerySpec
from .times import show

if TYPE_CHECKING:
    from datetime import tzinfo

COLUMNS = ["ts", "level", "host", "ip", "rank", "pid", "role", "logger", "msg", "step", "source", "offset"]
MAX_RECORDS = 200_000


def _node(row: dict[str, Any]) -> str:
    rank = row.get("rank")
    return f"{row['host']}/rank {rank}" if rank is not None else f"{row['host']}/pid {row.get('pid')}"


def build_trace(source: Any, trace_id: str, spec: QuerySpec | None = None, tz: tzinfo | None = None) -> dict[str, Any]:
    """The trace as a JSON-ready dict: ``timeline``, ``groups``, ``slowest_step`` and totals (times in
    `tz`, UTC by default)."""
    if not trace_id.strip():
        raise UserError("give a trace id")
    spec = dataclasses.replace(spec or QuerySpec(), trace_ids=(trace_id.strip(),), order=("ts",),
                               limit=MAX_RECORDS + 1)
    table = engine.read(source, spec, COLUMNS)
    truncated = table.num_rows > MAX_RECORDS
    table = table.slice(0, MAX_RECORDS)
    rows = table.drop_columns(["ts"]).to_pylist()
    ns = ts_ns(table.column("ts")).tolist()
    timeline: list[dict[str, Any]] = []
    groups: dict[str, dict[str, Any]] = {}
    last_in_group: dict[str, int] = {}
    slowest: dict[str, Any] | None = None
    for i, (row, ts) in enumerate(zip(rows, ns, strict=True)):
        node = _node(row)
        delta = None if i == 0 else (ts - ns[i - 1]) / 1e6
        group_delta = None if node not in last_in_group else (ts - last_in_group[node]) / 1e6
        hop = i > 0 and node != timeline[-1]["node"]
        entry = {"ts": show(ts, tz), "delta_ms": delta, "node_delta_ms": group_delta, "hop": hop, "node": node,
                 **{k: row[k] for k in COLUMNS if k != "ts"}}
        timeline.append(entry)
        if delta is not None and (slowest is None or delta > slowest["delta_ms"]):
            slowest = {"delta_ms": delta, "from": timeline[-2]["node"], "to": node, "at": entry["ts"], "hop": hop}
        group = groups.setdefault(node, {"node": node, "host": row["host"], "rank": row["rank"], "records": 0,
                                         "first": entry["ts"], "max_gap_ms": 0.0, "_first_ns": ts})
        group["records"] += 1
        group["last"] = entry["ts"]
        group["span_ms"] = (ts - group["_first_ns"]) / 1e6
        if group_delta is not None:
            group["max_gap_ms"] = max(group["max_gap_ms"], group_delta)
        last_in_group[node] = ts
    for group in groups.values():
        group.pop("_first_ns")
    return {
        "trace_id": trace_id, "records": len(timeline), "truncated": truncated,
        "start": timeline[0]["ts"] if timeline else None, "end": timeline[-1]["ts"] if timeline else None,
        "duration_ms": (ns[len(rows) - 1] - ns[0]) / 1e6 if rows else 0.0,
        "nodes": len(groups), "slowest_step": slowest, "groups": list(groups.values()), "timeline": timeline,
    }


def _ms(value: float | None) -> str:
    if value is None:
        return ""
    return f"+{value / 1000:.3f}s" if value >= 1000 else f"+{value:.1f}ms"


def render_trace(report: dict[str, Any]) -> None:
    """Print the timeline (sections per run of one node/rank) and the per-node summary with rich."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not report["records"]:
        console.print(f"no records with trace id {report['trace_id']}")
        return
    slowest = report["slowest_step"]
    console.print(f"[bold]trace {report['trace_id']}[/]: {report['records']} records on {report['nodes']} "
                  f"node/rank(s), {_ms(report['duration_ms']).lstrip('+')} from {report['start']} to {report['end']}")
    timeline = Table(header_style="bold")
    for name in ("ts", "since prev", "node/rank", "level", "msg"):
        timeline.add_column(name, overflow="fold", no_wrap=name != "msg", min_width=30 if name == "msg" else None)
    rows = report["timeline"]
    for i, row in enumerate(rows):
        is_slowest = slowest is not None and row["ts"] == slowest["at"] and row["delta_ms"] == slowest["delta_ms"]
        delta = _ms(row["delta_ms"]) + (" ← slowest" if is_slowest and len(rows) > 2 else "")
        timeline.add_row(row["ts"], delta, row["node"], row["level"], row["msg"].split("\n", 1)[0][:300],
                         style="bold yellow" if is_slowest and len(rows) > 2 else None,
                         end_section=i + 1 < len(rows) and rows[i + 1]["hop"])
    console.print(timeline)
    summary = Table(title="per node/rank", header_style="bold")
    for name in ("node/rank", "records", "first", "last", "span", "largest gap"):
        summary.add_column(name, no_wrap=True)
    for group in report["groups"]:
        summary.add_row(group["node"], str(group["records"]), group["first"], group["last"],
                        _ms(group["span_ms"]).lstrip("+"), _ms(group["max_gap_ms"]).lstrip("+"))
    console.print(summary)
    if slowest is not None and len(rows) > 2:
        kind = "hop" if slowest["hop"] else "step"
        console.print(f"slowest {kind}: {_ms(slowest['delta_ms']).lstrip('+')} from {slowest['from']} "
                      f"to {slowest['to']} at {slowest['at']}")
    if report["truncated"]:
        console.print(f"[yellow]only the first {MAX_RECORDS} records are shown[/]")


TIMELINE_COLUMNS = ["ts", "delta_ms", "node_delta_ms", "hop", "node", "level", "host", "ip", "rank", "pid", "role",
                    "logger", "step", "msg", "source", "offset"]


def trace_lines(report: dict[str, Any]) -> list[str]:
    """The trace as plain text (``--format raw``): a heading, one uncut line per record (its message's
    first line; the time since the previous record), each node/rank's summary and the slowest step."""
    if not report["records"]:
        return [f"no records with trace id {report['trace_id']}"]
    lines = [f"trace {report['trace_id']}: {report['records']} records on {report['nodes']} node/rank(s), "
             f"{_ms(report['duration_ms']).lstrip('+')} from {report['start']} to {report['end']}"]
    for row in report["timeline"]:
        first = (row["msg"] or "").split("\n", 1)[0]
        lines.append(f"{row['ts']} {_ms(row['delta_ms']) or '+0'} {row['node']} {row['level']} {first}")
    for group in report["groups"]:
        lines.append(f"node/rank {group['node']}: {group['records']} records, {group['first']} .. {group['last']}, "
                     f"largest gap {_ms(group['max_gap_ms']).lstrip('+')}")
    slowest = report["slowest_step"]
    if slowest is not None and report["records"] > 2:
        lines.append(f"slowest {'hop' if slowest['hop'] else 'step'}: {_ms(slowest['delta_ms']).lstrip('+')} "
                     f"from {slowest['from']} to {slowest['to']} at {slowest['at']}")
    if report["truncated"]:
        lines.append(f"only the first {MAX_RECORDS} records are shown")
    return lines


def trace_rows(report: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """The timeline as CSV columns and rows (``--format csv``)."""
    return TIMELINE_COLUMNS, report["timeline"]
