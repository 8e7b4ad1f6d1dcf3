"""One self-contained HTML file: the verdict, error timeline, log volume, training curves, templates.

Text parts (verdict, tables, examples) are static HTML, readable even with scripts disabled; the
plots are drawn as inline SVG by a small script of our own (``report.js``) from JSON embedded in
the page. Nothing is fetched from the network: no CDN, fonts or images.
"""

from __future__ import annotations

import html
import json
from datetime import datetime, timezone
from importlib import resources
from typing import TYPE_CHECKING, Any

from ..record import format_ts
from ..triage.present import to_dict
from ..triage.templates import describe_ranks

if TYPE_CHECKING:
    from ..triage.analyze import Triage

TOP_TEMPLATES = 30
MAX_TIMELINE_POINTS = 5000

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0 auto;max-width:1100px;padding:16px 24px;color:#222}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#666}.verdict{border:2px solid #c62828;border-radius:6px;padding:12px 16px;background:#fff5f5}
.verdict.ok{border-color:#2e7d32;background:#f3fbf3}.verdict.degraded{border-color:#ef8f00;background:#fff8e6}.verdict .summary{font-size:18px;font-weight:600}
pre{background:#f6f6f6;padding:8px;overflow-x:auto;font-size:12px;line-height:1.35;white-space:pre-wrap}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{border-bottom:1px solid #e3e3e3;padding:4px 6px;
text-align:left;vertical-align:top}th{background:#fafafa}td.n{text-align:right;font-variant-numeric:tabular-nums}
code{font-size:12px}.chart{background:#fff;border:1px solid #eee}.chart text{font-size:11px;fill:#444}
.chart .label{font-size:12px;fill:#222}.axis line{stroke:#999}.axis line.grid{stroke:#eee}
.mark{stroke:#c62828;stroke-dasharray:4 3}.nonfinite{stroke:#bcbd22;stroke-width:2;opacity:.6}
.legend span{margin-right:14px;font-size:12px}.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;border:1px solid #999}
.grid2{display:grid;grid-template-columns:1fr 1fr;gap:12px}.empty{color:#888;font-style:italic}
details{margin:6px 0}summary{cursor:pointer}.consequence{color:#777}
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _line_row(line: dict[str, Any] | None) -> str:
    if not line:
        return ""
    who = f"rank {line['rank']}" if line["rank"] is not None else (line.get("role") or "-")
    return (f"<tr><td><code>{_e(line['ts'])}</code></td><td>{_e(line['host'])}</td><td>{_e(who)}</td>"
            f"<td>{_e(line['level'])}</td><td>{_e(line['msg'])}"
            + (f"<pre>{_e(line['exc'])}</pre>" if line.get("exc") else "") + "</td></tr>")


def _lines_table(lines: list[dict[str, Any]]) -> str:
    if not lines:
        return "<p class='empty'>none</p>"
    head = "<tr><th>time</th><th>node</th><th>who</th><th>level</th><th>message</th></tr>"
    return "<table>" + head + "".join(_line_row(line) for line in lines) + "</table>"


def _decisive_text(line: dict[str, Any]) -> str:
    """Message and traceback, without repeating the message when the traceback ends with it."""
    msg, exc = line["msg"].strip(), (line.get("exc") or "").strip()
    if not exc:
        return msg
    first = msg.splitlines()[0][:120] if msg else ""
    return exc if first and first in exc else f"{msg}\n\n{exc}"


def _verdict(doc: dict[str, Any]) -> str:
    v = doc["verdict"]
    ok = v["status"] not in ("failure", "degraded")
    style = {"failure": "", "degraded": " degraded"}.get(v["status"], " ok")
    title = {"failure": "Root cause", "degraded": "Degraded"}.get(v["status"], "Verdict")
    parts = [f"<div class='verdict{style}' id='verdict'>", f"<div class='summary'>{title}: {_e(v['summary'])}</div>"]
    if not ok:
        parts.append(f"<p>category <b>{_e(v['category'])}</b> · {_e(describe_ranks(v['ranks']) or '-')} · "
                     f"node(s) {_e(', '.join(v['hosts']) or '-')} · confidence <b>{_e(v['confidence'])}</b></p>")
    parts.append("<ul>" + "".join(f"<li>{_e(r)}</li>" for r in v["reasons"]) + "</ul>")
    d = v["decisive"]
    if d:
        parts.append(f"<h3>Decisive record</h3><p><code>{_e(d['ts'])}</code> {_e(d['host'])} "
                     f"{_e('rank ' + str(d['rank']) if d['rank'] is not None else d.get('role') or '')} "
                     f"<code>{_e(d['source'])}</code></p><pre>{_e(_decisive_text(d))}</pre>")
    if v["before"]:
        title = "What the rank wrote just before it" if d else "The rank's last records"
        parts.append(f"<details open><summary>{title}</summary>{_lines_table(v['before'])}</details>")
    parts.append("</div>")
    return "".join(parts)


def _templates(doc: dict[str, Any]) -> str:
    groups = doc["evidence"]["templates"][:TOP_TEMPLATES]
    if not groups:
        return "<p class='empty'>no warnings or errors</p>"
    rows, examples = [], []
    for n, g in enumerate(groups):
        label = (g["category"] or "-") + (" (consequence)" if g["consequence"] else "")
        who = f"ranks {g['ranks']}" if g["ranks"] else ", ".join(g["hosts"])
        rows.append(f"<tr class='{'consequence' if g['consequence'] else ''}'><td class='n'>{g['count']}</td>"
                    f"<td>{_e(who)}</td><td>{_e(label)}</td><td><code>{_e(g['first']['corrected_ts'])}</code></td>"
                    f"<td><a href='#tpl-{n}'>{_e(g['template'])}</a></td></tr>")
        examples.append(f"<details id='tpl-{n}'><summary><code>{_e(g['template'])}</code> — {g['count']} record(s)"
                        f"</summary>{_lines_table(g['examples'])}</details>")
    more = len(doc["evidence"]["templates"]) - len(groups)
    head = "<tr><th>count</th><th>who</th><th>category</th><th>first seen</th><th>template</th></tr>"
    return ("<table id='templates'>" + head + "".join(rows) + "</table>"
            + (f"<p class='meta'>… {more} more templates</p>" if more > 0 else "")
            + "<h3>Example records per template</h3>" + "".join(examples))


def _evidence_notes(doc: dict[str, Any]) -> str:
    ev = doc["evidence"]
    items = []
    seq = ev["seqnums"]
    if seq["majority"] is not None or seq["absent"]:
        text = f"NCCL: the majority timed out on SeqNum={seq['majority']}"
        if seq["laggards"]:
            text += f"; behind it: {describe_ranks(seq['laggards'])}"
        if seq["absent"]:
            text += f"; no timeout from {describe_ranks(seq['absent'])}"
        items.append(text)
    for s in ev["silent"]:
        items.append(f"silent: rank {s['rank']} on {s['host']}, last record {s['last_ts']}, "
                     f"{s['quiet_s']:.0f}s before {s['reference']}")
    if ev["clock_offsets_s"]:
        items.append(f"clock offsets (from {ev['clock_anchor']}): " + ", ".join(
            f"{h} {o:+.1f}s" for h, o in ev["clock_offsets_s"].items()))
    items += [f"note: {n}" for n in ev["notes"]]
    return ("<ul>" + "".join(f"<li>{_e(i)}</li>" for i in items) + "</ul>") if items else ""


def _jobs_table(doc: dict[str, Any]) -> str:
    """Every job of the range with its verdict (the one the page details first), when there are several."""
    judged = doc["jobs_judged"]
    if len(judged) < 2:
        return ""
    rows = "".join(f"<tr><td>{_e(j['job'] or '(records without a job id)')}</td><td>{_e(j['status'])}</td>"
                   f"<td>{_e(j['summary'])}</td></tr>" for j in judged)
    return ("<h2 id='jobs'>Jobs in this range</h2><p class='meta'>each judged on its own; this page details the "
            "first (<code>ranklog report --job J</code> for another)</p><table><tr><th>job</th><th>status</th>"
            f"<th>verdict</th></tr>{rows}</table>")


def _plot_data(triage: Triage, doc: dict[str, Any], volume: dict[str, Any], curves: dict[str, Any]) -> dict[str, Any]:
    timeline = triage.evidence.timeline[:MAX_TIMELINE_POINTS]
    base = volume["start_ns"] or (min((inc.adj_ts for inc in timeline), default=0))
    return {
        "verdict": {k: doc["verdict"][k] for k in ("status", "summary", "step", "category")},
        "timeline": [{"t": (inc.adj_ts - base) / 1e9, "rank": inc.rank, "host": inc.host, "category": inc.category,
                      "consequence": inc.consequence, "level": inc.line.level, "msg": inc.line.msg[:300]}
                     for inc in timeline],
        "volume": {"bucket_ns": volume["bucket_ns"], "hosts": volume["hosts"]},
        "curves": curves,
        "step_times": triage.evidence.step_times,
    }


def render_html(triage: Triage, volume: dict[str, Any], curves: dict[str, Any]) -> str:
    """The complete page."""
    doc = to_dict(triage)
    script = resources.files(__package__).joinpath("report.js").read_text(encoding="utf-8")
    payload = json.dumps(_plot_data(triage, doc, volume, curves), ensure_ascii=False, allow_nan=False)
    payload = payload.replace("</", "<\\/")
    ev = doc["evidence"]
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    start = format_ts(volume["start_ns"]) if volume["start_ns"] else "-"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ranklog report — {_e(triage.job or triage.source)}</title>
<style>{_CSS}</style></head>
<body>
<h1>ranklog report{(' — job ' + _e(triage.job)) if triage.job else ''}</h1>
<p class="meta">{_e(triage.source)} · {ev['ranks']} ranks on {len(ev['hosts'])} node(s) · {ev['records']:,} records
from {_e(start)} · generated {generated}</p>
{_jobs_table(doc)}
<h2>Verdict</h2>
{_verdict(doc)}
{_evidence_notes(doc)}
<h2>Errors per rank over time</h2>
<div id="plot-timeline" class="plot"></div>
<h2>Log volume per node</h2>
<div id="plot-volume" class="plot"></div>
<h2>Training, from the logs</h2>
<div class="grid2"><div id="plot-loss" class="plot"></div><div id="plot-throughput" class="plot"></div></div>
<h2 id="step-times">Time per step, by rank</h2>
<div id="plot-step-times" class="plot"></div>
<h2 id="top-templates">Top error templates</h2>
{_templates(doc)}
<script type="application/json" id="report-data">{payload}</script>
<script>{script}</script>
</body></html>
"""
