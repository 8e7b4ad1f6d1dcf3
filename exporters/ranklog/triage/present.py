"""Show a triage: the verdict first, then the evidence; for a terminal (rich) or as JSON.

The JSON document is the complete result (every template, the whole timeline); the terminal view
shortens long lists (top templates, first timeline entries) and says how many it left out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..record import format_ts
from .evidence import SECOND, Incident
from .gather import Line
from .templates import describe_ranks, format_ranks

if TYPE_CHECKING:
    from rich.console import Console

    from .analyze import Triage

TOP_TEMPLATES = 12
TIMELINE_ROWS = 16
TRACEBACK_LINES = 40


def line_dict(line: Line | None) -> dict[str, Any] | None:
    if line is None:
        return None
    return {"ts": format_ts(line.ts), "level": line.level, "host": line.host, "rank": line.rank, "pid": line.pid,
            "role": line.role, "step": line.step, "msg": line.msg, "exc": line.exc, "source": line.source,
            "offset": line.offset, "format": line.format}


def _incident_dict(inc: Incident) -> dict[str, Any]:
    return {"rank": inc.rank, "host": inc.host, "ts": format_ts(inc.line.ts), "corrected_ts": format_ts(inc.adj_ts),
            "category": inc.category, "signature": inc.signature.name if inc.signature else None,
            "consequence": inc.consequence, "level": inc.line.level, "step": inc.line.step,
            "template": inc.template}


def job_verdict(triage: Triage) -> dict[str, Any]:
    """One judged job in a line of data: what ``jobs_judged`` lists (and the report's jobs table)."""
    v = triage.verdict
    return {"job": triage.job, "status": v.status, "summary": v.summary, "category": v.category, "ranks": v.ranks,
            "hosts": v.hosts, "step": v.step, "confidence": v.confidence}


def to_dict(triage: Triage) -> dict[str, Any]:
    """The whole result as plain JSON-able data (``ranklog triage --json``): the job shown first in
    full, and every judged job's verdict in ``jobs_judged`` (that job first)."""
    v, ev = triage.verdict, triage.evidence
    return {
        "source": triage.source, "job": triage.job, "jobs": triage.jobs,
        "jobs_judged": [job_verdict(t) for t in triage.all], "exit_code": triage.exit_code,
        "verdict": {
            "status": v.status, "category": v.category, "ranks": v.ranks, "ranks_text": format_ranks(v.ranks),
            "hosts": v.hosts, "summary": v.summary, "confidence": v.confidence, "reasons": v.reasons,
            "signature": v.signature, "step": v.step, "decisive": line_dict(v.decisive),
            "before": [line_dict(line) for line in v.before],
        },
        "evidence": {
            "templates": [{"template": g.template, "category": g.category, "signature": g.signature,
                           "consequence": g.consequence, "count": g.count, "ranks": format_ranks(g.ranks),
                           "hosts": g.hosts, "first": _incident_dict(g.first),
                           "examples": [line_dict(line) for line in g.examples]} for g in ev.templates],
            "timeline": [_incident_dict(inc) for inc in ev.timeline],
            "seqnums": {"majority": ev.seqnums.majority, "laggards": ev.seqnums.laggards,
                        "absent": ev.seqnums.absent, "by_rank": {str(k): s for k, s in sorted(ev.seqnums.by_rank.items())},
                        "timeout_s": ev.seqnums.timeout_ns / SECOND if ev.seqnums.timeout_ns else None},
            "silent": [{"rank": s.process.rank, "host": s.process.host, "last_ts": format_ts(s.process.last_ts),
                        "quiet_s": round(s.quiet_ns / SECOND, 3), "reference": s.reference,
                        "last_step": s.process.last_step}
                       for s in ev.silent],
            "clock_offsets_s": {h: off / SECOND for h, off in sorted(ev.offsets.items())},
            "clock_anchor": ev.offset_anchor, "clock_uncertainty_s": ev.uncertainty_ns / SECOND,
            "ranks": len(ev.ranked_processes()), "hosts": sorted({p.host for p in ev.processes}),
            "records": sum(p.records for p in ev.processes),
            "unclassified_errors": ev.unclassified_errors, "notes": ev.notes,
        },
        "timings_s": {k: round(t, 4) for k, t in triage.timings.items()},
    }


def _short(text: str, limit: int = 160) -> str:
    first = text.splitlines()[0] if text else ""
    return first if len(first) <= limit else first[: limit - 1] + "…"


def _who(line: Line) -> str:
    return f"rank {line.rank}" if line.rank is not None else (line.role or "no rank")


def make_console() -> Console:
    """A rich console; when the output is not a terminal (a pipe, CI logs) lines are 140 columns
    unless $COLUMNS says otherwise, so tables are not squeezed into rich's 80-column default."""
    import os
    import sys

    from rich.console import Console

    width = None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 140
    return Console(highlight=False, soft_wrap=False, width=width)


def _collapse(timeline: list[Incident]) -> list[tuple[Incident, list[Incident]]]:
    """Consecutive entries with the same template (1000 ranks timing out) become one row."""
    rows: list[tuple[Incident, list[Incident]]] = []
    for inc in timeline:
        if rows and rows[-1][0].template == inc.template and rows[-1][0].consequence == inc.consequence:
            rows[-1][1].append(inc)
        else:
            rows.append((inc, []))
    return rows


def render(triage: Triage, console: Console) -> None:
    """Print the verdict panel, then the evidence tables."""
    from rich.markup import escape
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    def add_row(table: Table, *cells: str) -> None:
        table.add_row(*(Text(cell) for cell in cells))  # log text is data, never rich markup

    v, ev = triage.verdict, triage.evidence
    failed = v.status == "failure"
    degraded = v.status == "degraded"
    color = "red" if failed else "yellow" if degraded else "green"
    body = Text()
    body.append(("ROOT CAUSE: " if failed else "DEGRADED: " if degraded else "VERDICT: ") + v.summary + "\n",
                style=f"bold {color}")
    if failed or degraded:
        body.append(f"category: {v.category}    ranks: {format_ranks(v.ranks) or '-'}    "
                    f"nodes: {', '.join(v.hosts) or '-'}    confidence: {v.confidence}\n")
    else:
        body.append(f"confidence: {v.confidence}\n")
    for reason in v.reasons:
        body.append(f"  • {reason}\n")
    if v.decisive is not None:
        d = v.decisive
        body.append(f"\ndecisive record  {format_ts(d.ts)}  {d.host}  {_who(d)}  {d.level}  "
                    f"{d.source or ''}\n", style="bold")
        first = d.msg.strip().splitlines()[0][:120] if d.msg.strip() else ""
        if not d.exc or not first or first not in d.exc:
            body.append(d.msg.rstrip() + "\n", style="red")
        if d.exc:
            lines = d.exc.rstrip().splitlines()
            shown = lines[-TRACEBACK_LINES:]
            if len(lines) > len(shown):
                body.append(f"  … {len(lines) - len(shown)} traceback lines above\n", style="dim")
            body.append("\n".join(shown) + "\n", style="red")
    if v.before:
        heading = ("what the rank wrote just before it" if v.decisive is not None else
                   "the last records of its ranks" if v.subjects else "the rank's last records")
        body.append(f"\n{heading}:\n", style="bold")
        for line in v.before:
            who = f"rank {line.rank:<4} " if v.subjects else ""
            body.append(f"  {format_ts(line.ts)} {who}{line.level:<8} {_short(line.msg, 140)}\n", style="dim")
    title = f"ranklog triage — {triage.source}" + (f" — job {triage.job}" if triage.job else "")
    console.print(Panel(body, title=Text(title), border_style=color))

    for note in ev.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    if triage.others:
        table = Table(title="Other jobs in the range (each judged on its own; --job shows one in full)",
                      title_justify="left")
        for column in ("job", "status", "verdict"):
            table.add_column(column, overflow="fold")
        for other in triage.others:
            add_row(table, other.job or "(records without a job id)", other.verdict.status, other.verdict.summary)
        console.print(table)

    if ev.templates:
        table = Table(title="Error templates (identical messages collapsed across ranks)", title_justify="left")
        for column in ("ranks", "count", "category", "first seen", "template"):
            table.add_column(column, overflow="fold")
        for group in ev.templates[:TOP_TEMPLATES]:
            first = group.first
            add_row(table, describe_ranks(group.ranks) or ", ".join(group.hosts), str(group.count),
                          (group.category or "-") + (" (consequence)" if group.consequence else ""),
                          f"{format_ts(first.adj_ts)} {_who(first.line)}", _short(group.template, 120))
        console.print(table)
        if len(ev.templates) > TOP_TEMPLATES:
            console.print(f"  … {len(ev.templates) - TOP_TEMPLATES} more templates (--json lists all)")

    seq = ev.seqnums
    if seq.by_rank or seq.absent:
        parts = [f"majority timed out on SeqNum={seq.majority}" if seq.majority is not None else "timeouts seen"]
        if seq.laggards:
            parts.append(f"behind the majority: {describe_ranks(seq.laggards)}")
        if seq.absent:
            parts.append(f"no timeout reported by {describe_ranks(seq.absent)}")
        if seq.timeout_ns:
            parts.append(f"collective timeout {seq.timeout_ns / SECOND:g}s")
        console.print("[bold]NCCL sequence numbers:[/] " + escape("; ".join(parts)))

    for s in ev.silent:
        console.print(f"[bold]silent:[/] rank {s.process.rank} on {escape(s.process.host)}: last record "
                      f"{format_ts(s.process.last_ts)}, {s.quiet_ns / SECOND:.1f}s before {s.reference}")

    if ev.offsets:
        console.print("[bold]clock offsets[/] (from " + ev.offset_anchor + "): " + escape(", ".join(
            f"{host} {off / SECOND:+.1f}s" for host, off in sorted(ev.offsets.items()))))

    if ev.timeline:
        table = Table(title="First error per rank (clock-corrected time order)", title_justify="left")
        for column in ("time", "node", "rank", "category", "message"):
            table.add_column(column, overflow="fold")
        shown = 0
        for inc, others in _collapse(ev.timeline):
            if shown >= TIMELINE_ROWS:
                break
            shown += 1
            rank = "-" if inc.rank is None else str(inc.rank)
            if others:
                rank = describe_ranks([inc.rank, *(o.rank for o in others)]) or rank
            add_row(table, format_ts(inc.adj_ts) + (f" … +{(others[-1].adj_ts - inc.adj_ts) / SECOND:.1f}s"
                                                   if others else ""),
                          ", ".join(sorted({inc.host, *(o.host for o in others)})), rank,
                          (inc.category or inc.line.level) + (" (consequence)" if inc.consequence else ""),
                          _short(inc.line.msg, 100))
        console.print(table)
        rest = len(_collapse(ev.timeline)) - shown
        if rest > 0:
            console.print(f"  … {rest} more rows (--json lists every rank)")
    console.print(f"[dim]{len(ev.ranked_processes())} ranks on {len({p.host for p in ev.processes})} nodes, "
                  f"{sum(p.records for p in ev.processes):,} records; triage took "
                  f"{triage.timings.get('total', 0.0):.2f}s[/]")


TIMELINE_COLUMNS = ["rank", "host", "ts", "corrected_ts", "category", "signature", "consequence", "level", "step",
                    "template"]


def triage_rows(document: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """The first error of each rank, in clock-corrected order, as CSV columns and rows (``--format csv``)."""
    return TIMELINE_COLUMNS, document["evidence"]["timeline"]


def triage_lines(document: dict[str, Any]) -> list[str]:
    """The result of :func:`to_dict` as plain uncut text (``--format raw``, the default when piped):
    the verdict first, then every template and every rank's first error, one line each."""
    v, ev = document["verdict"], document["evidence"]
    failed = v["status"] == "failure"
    lines = [("ROOT CAUSE: " if failed else "VERDICT: ") + v["summary"]]
    if failed:
        lines.append(f"category: {v['category']}  ranks: {v['ranks_text'] or '-'}  nodes: {', '.join(v['hosts']) or '-'}"
                     f"  confidence: {v['confidence']}")
    else:
        lines.append(f"confidence: {v['confidence']}")
    lines += [f"reason: {reason}" for reason in v["reasons"]]
    decisive = v["decisive"]
    if decisive is not None:
        lines.append(f"decisive record: {decisive['ts']} {decisive['host']} rank {decisive['rank']} "
                     f"{decisive['level']} {decisive['source'] or ''}".rstrip())
        lines += [f"  {line}" for line in (decisive["msg"] or "").rstrip().splitlines()]
        lines += [f"  {line}" for line in (decisive["exc"] or "").rstrip().splitlines()]
    lines += [f"before: {line['ts']} {line['level']} {(line['msg'] or '').splitlines()[0] if line['msg'] else ''}"
              for line in v["before"]]
    lines += [f"note: {note}" for note in ev["notes"]]
    lines += [f"other job: {other['job'] or '(records without a job id)'} {other['status']}: {other['summary']}"
              for other in document["jobs_judged"][1:]]
    for group in ev["templates"]:
        lines.append(f"template: ranks {group['ranks'] or '-'} count {group['count']} {group['category'] or '-'}"
                     f"{' (consequence)' if group['consequence'] else ''}: {group['template']}")
    for inc in ev["timeline"]:
        lines.append(f"first error: {inc['corrected_ts']} {inc['host']} rank {inc['rank']} "
                     f"{inc['category'] or inc['level']}{' (consequence)' if inc['consequence'] else ''}: "
                     f"{(inc['template'] or '').splitlines()[0] if inc['template'] else ''}")
    lines.append(f"{ev['ranks']} ranks on {len(ev['hosts'])} nodes, {ev['records']:,} records")
    return lines
