"""The verdict as receivers get it: one JSON document built from triage's fields, and its texts.

Written against the fields of :class:`ranklog.triage.verdict.Verdict` (status, category, ranks, hosts,
step, confidence, summary, reasons, decisive, signature), never against triage's printed text, so a
better triage changes what is said, not how it is delivered. The document (``version`` 1)::

    {"version": 1, "kind": "verdict" | "update", "incident": "<id>", "revision": 2, "training_job": "ppo-7b",
     "status": "failure", "category": "CUDA OOM", "ranks": [3], "hosts": ["node0"], "step": 4,
     "confidence": "high", "summary": "…", "reasons": ["…"],
     "decisive": {"ts": "…Z", "host": "node0", "rank": 3, "level": "ERROR", "source": "…", "line": "…", "text": "…"},
     "report_url": "https://archive:8470/v1/reports/<id>", "triggers": [{"alertname": …, "rank": …, …}],
     "previous": {…the last verdict's status, category, ranks, hosts…} | null, "triaged_at": "…Z"}

:func:`fingerprint` is what makes a verdict "changed": status, category, ranks and hosts. A new
decisive line or confidence for the same rank and cause is kept (the report shows it) but pages no one.
"""

from __future__ import annotations

import time
from typing import Any

from ...record import format_ts

SEND_STATUSES = ("failure", "degraded")  # a verdict worth a message; "no failure" / "no data" are only kept
LINE_LIMIT = 300
TEXT_LIMIT = 2000


def decisive_line(msg: str, exc: str | None) -> str:
    """The line that says what happened: the message's first line, or a traceback's last."""
    lines = [line.strip() for line in (msg or "").splitlines() if line.strip()]
    first = lines[0] if lines else ""
    if (not first or first.startswith("Traceback")) and exc:
        tail = [line.strip() for line in exc.splitlines() if line.strip()]
        first = tail[-1] if tail else first
    return first if len(first) <= LINE_LIMIT else first[: LINE_LIMIT - 1] + "…"


def _decisive(verdict: Any) -> dict[str, Any] | None:
    line = verdict.decisive
    if line is None:
        return None
    text = line.msg if not line.exc or line.exc in line.msg else f"{line.msg}\n{line.exc}"
    return {"ts": format_ts(line.ts), "host": line.host, "rank": line.rank, "level": line.level,
            "source": line.source, "line": decisive_line(line.msg, line.exc),
            "text": text if len(text) <= TEXT_LIMIT else "…" + text[-(TEXT_LIMIT - 1):]}


def verdict_fields(triage: Any) -> dict[str, Any]:
    """What a triage concluded, as plain JSON values (the part of the document triage decides)."""
    verdict = triage.verdict
    return {"training_job": triage.job, "status": verdict.status, "category": verdict.category,
            "ranks": list(verdict.ranks), "hosts": list(verdict.hosts), "step": verdict.step,
            "confidence": verdict.confidence, "summary": verdict.summary, "reasons": list(verdict.reasons),
            "signature": getattr(verdict, "signature", None), "decisive": _decisive(verdict),
            "triaged_at": format_ts(time.time_ns())}


def fingerprint(fields: dict[str, Any]) -> list[Any]:
    return [fields["status"], fields["category"], sorted(fields["ranks"]), sorted(fields["hosts"])]


def document(fields: dict[str, Any], incident: Any, kind: str, report_url: str,
             previous: dict[str, Any] | None) -> dict[str, Any]:
    """The JSON document a receiver is sent (see the module docstring)."""
    return {"version": 1, "kind": kind, "incident": incident.id, "revision": incident.revision, **fields,
            "training_job": incident.job or fields.get("training_job"), "report_url": report_url,
            "triggers": incident.triggers[-20:],
            "previous": None if previous is None else {k: previous.get(k) for k in
                                                       ("status", "category", "ranks", "hosts", "step", "summary")}}


def who(doc: dict[str, Any]) -> str:
    """``rank 3 on node0`` / ``ranks 0-7 on node0, node1`` / ``node0``."""
    from ...triage.templates import describe_ranks

    ranks = describe_ranks(doc["ranks"]) if doc["ranks"] else ""
    hosts = ", ".join(doc["hosts"])
    return f"{ranks} on {hosts}" if ranks and hosts else ranks or hosts or "an unknown process"


def headline(doc: dict[str, Any]) -> str:
    """One line: who, what, when and how sure."""
    step = f" at step {doc['step']}" if doc.get("step") is not None else ""
    return f"{who(doc)}: {doc['category'] or doc['status']}{step} (confidence {doc['confidence']})"


def previous_headline(doc: dict[str, Any]) -> str:
    prev = doc.get("previous")
    if not prev:
        return ""
    step = f" at step {prev['step']}" if prev.get("step") is not None else ""
    return f"{who(prev)}: {prev['category'] or prev['status']}{step}"


def trigger_names(doc: dict[str, Any]) -> str:
    names = dict.fromkeys(t["alertname"] for t in doc["triggers"])
    return ", ".join(names) or "-"
