"""Triage of one job for an incident, over the recent window only, through triage's public API.

What is read: the hour partitions overlapping ``[window start - lookback, now]`` (the archive's
``date=/hour=`` directories are the day index of its files; nothing outside the window is listed or
opened), only the columns triage uses, and in them the job's records (triage's own selection:
the job's ranks plus the records that name no job). The whole archive is never scanned: a 30-day
archive costs the same as a fresh one. The same :class:`~ranklog.triage.gather.TriageData` then
feeds the HTML report (written atomically, served at ``/v1/reports/<incident id>``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from ...agent_outages import AgentOutage
from ...errors import UserError
from ...query.sources import ArchiveSource
from ...report import write_report
from ...triage.analyze import analyze
from ...triage.gather import TriageData

log = logging.getLogger("ranklog.archive.verdicts")
NO_DATA = "no data"


@dataclass
class Judgement:
    status: str
    triage: Any = None  # ranklog.triage.analyze.Triage, None when there was nothing to judge
    data: TriageData | None = None
    files: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    note: str = ""


def judge(root: str, s3: Any, job: str, start_ns: int, outages: list[AgentOutage] | None = None) -> Judgement:
    """Triage `job` ("" = the newest job, for records that name none) from `start_ns` on, with the
    agent `outages` the archive heard of as evidence (a lost node)."""
    started = time.perf_counter()
    source = ArchiveSource.open(root, s3)
    files = source.list_files(start_ns, None) if source.local_root is not None else []
    data = TriageData.from_source(source, start_ns, None)
    data.agent_outages = list(outages or [])
    listed = time.perf_counter()
    try:
        result = analyze(data, job or None, start_ns, None)
    except UserError as exc:  # the job's records are not in the window (yet)
        return Judgement(NO_DATA, files=len(files), note=str(exc),
                         timings={"read": listed - started, "total": time.perf_counter() - started})
    timings = {"read": listed - started, **result.timings, "total": time.perf_counter() - started}
    return Judgement(result.verdict.status, result, data, len(files), timings)


def report(judgement: Judgement, path: str) -> float:
    """Write the HTML report of `judgement` to `path`; the seconds it took."""
    started = time.perf_counter()
    write_report(judgement.data, judgement.triage, path)
    return time.perf_counter() - started
