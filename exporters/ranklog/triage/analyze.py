"""One call from a source to a verdict with its evidence (what the CLI, the report and the demo use)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .evidence import Evidence, collect
from .gather import TriageData, gather
from .verdict import Verdict, decide

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass
class Triage:
    source: str
    job: str | None
    jobs: list[str]
    verdict: Verdict
    evidence: Evidence
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage


def analyze(data: TriageData, job: str | None = None, start_ns: int | None = None,
            end_ns: int | None = None) -> Triage:
    """Gather, collect evidence and decide, timing each stage."""
    timings: dict[str, float] = {}
    started = time.perf_counter()
    gathered = gather(data, job, start_ns, end_ns)
    timings.update(gathered.timings)
    timings["gather"] = time.perf_counter() - started
    mark = time.perf_counter()
    evidence = collect(gathered)
    timings["evidence"] = time.perf_counter() - mark
    mark = time.perf_counter()
    verdict = decide(evidence, data)
    timings["verdict"] = time.perf_counter() - mark
    timings["total"] = time.perf_counter() - started
    return Triage(data.label, gathered.job, gathered.jobs, verdict, evidence, timings)


def analyze_table(table: pa.Table, job: str | None = None) -> Triage:
    """Triage an in-memory Arrow table of records (tests, the report of a parsed directory)."""
    return analyze(TriageData.from_table(table), job)
