"""A triage verdict as an archive record, so Grafana shows it as an annotation on the training dashboard.

``ranklog triage --annotate URL`` posts one NDJSON record to the archive at URL (``/v1/ingest``, the
source's bearer token): ``format = "triage"``, ``level = CRITICAL`` for a failure (``INFO`` otherwise),
``job``, ``rank`` and ``host`` of the root cause, ``ts`` of the decisive record (the verdict's time on
the dashboard; the time of triage when there is none), ``msg`` the verdict in one line, ``attrs`` the
category, confidence and reasons. Its key (``source_id = "triage:<job>"``, ``offset`` = a hash of the
verdict) makes a repeated triage of the same failure a duplicate, not a second annotation.
The training dashboard's annotation query is ``{format="triage", job=~"$training_job"}``.

These records are no log lines: queries leave them out unless they ask for ``format="triage"``, and
triage never reads them (:mod:`.gather`), so an annotated verdict does not feed the next one.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from ..errors import UserError
from ..record import ANNOTATION_FORMAT, format_ts

TRIAGE_FORMAT = ANNOTATION_FORMAT


def verdict_record(triage: Any) -> dict[str, Any]:
    verdict = triage.verdict
    decisive = verdict.decisive
    failed = verdict.status == "failure"
    text = f"triage: {verdict.summary}"
    if decisive is not None:
        text += f" | {decisive.msg.splitlines()[0][:300] if decisive.msg else ''}"
    key = json.dumps([triage.job, verdict.status, verdict.category, verdict.ranks, verdict.hosts, text])
    return {
        "ts": format_ts(decisive.ts if decisive is not None else time.time_ns()),
        "level": "CRITICAL" if failed else "INFO", "msg": text, "logger": "ranklog.triage",
        "host": decisive.host if decisive is not None else (verdict.hosts[0] if verdict.hosts else "unknown"),
        "ip": "", "rank": decisive.rank if decisive is not None else (verdict.ranks[0] if verdict.ranks else None),
        "job": triage.job, "step": verdict.step, "format": TRIAGE_FORMAT, "source": "ranklog triage",
        "source_id": f"triage:{triage.job}", "offset": int(hashlib.sha256(key.encode()).hexdigest()[:15], 16),
        "attrs": {"category": verdict.category, "confidence": verdict.confidence, "ranks": verdict.ranks,
                  "hosts": verdict.hosts, "signature": verdict.signature, "reasons": verdict.reasons},
    }


def post_verdict(url: str, token: str | None, triage: Any) -> dict[str, Any]:
    """Post the verdict record to the archive at `url`; its answer (``accepted``/``duplicates``)."""
    import httpx

    if not url.startswith(("http://", "https://")):
        raise UserError(f"--annotate needs the archive's URL (http[s]://host:port), got {url!r}")
    if not token:
        raise UserError("--annotate needs the archive's token: --token-file FILE or $RANKLOG_TOKEN")
    body = json.dumps(verdict_record(triage), ensure_ascii=False).encode() + b"\n"
    try:
        answer = httpx.post(url.rstrip("/") + "/v1/ingest", content=body, timeout=30,
                            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/x-ndjson"})
    except httpx.HTTPError as exc:
        raise UserError(f"--annotate: cannot reach {url}: {exc}") from None
    if answer.status_code != 200:
        raise UserError(f"--annotate: the archive answered {answer.status_code}: {answer.text[:200]}")
    return answer.json()
