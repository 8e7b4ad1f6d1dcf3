"""One call from a source to a verdict with its evidence (what the CLI, the report and the demo use).

A range may hold several jobs; each is judged on its own (:func:`.gather.gather`). :func:`analyze`
returns the one to show first — a failure before a slow-down before a healthy job, the newest
first among equals — with the others in :attr:`Triage.others`, so nothing found is left unsaid.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .evidence import Evidence, collect
from .gather import TriageData, TriageInput, gather
from .verdict import DEGRADED, FAILURE, NO_DATA, NO_FAILURE, Verdict, decide

if TYPE_CHECKING:
    import pyarrow as pa

# How a status weighs when jobs are ordered and when the command picks its exit code.
SEVERITY = {FAILURE: 3, DEGRADED: 2, NO_FAILURE: 1, NO_DATA: 0}
EXIT_CODES = {FAILURE: 1, DEGRADED: 3, NO_FAILURE: 0, NO_DATA: 0}


@dataclass
class Triage:
    source: str
    job: str | None
    jobs: list[str]
    verdict: Verdict
    evidence: Evidence
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage
    others: list[Triage] = field(default_factory=list)  # the range's other jobs, in the order shown
    gathered: TriageInput | None = field(default=None, repr=False)  # re-select it to read its records again

    @property
    def all(self) -> list[Triage]:
        """This job's triage and the others', in the order shown."""
        return [self, *self.others]

    @property
    def exit_code(self) -> int:
        """0 no failure, 1 a failure found, 3 degraded (a straggler or slow-down): the worst job decides."""
        return max((EXIT_CODES[t.verdict.status] for t in self.all), key=lambda code: (code == 1, code))

    def select(self) -> None:
        """Make the data's ``records`` view this job's selection again (after the others were judged)."""
        if self.gathered is not None:
            data = self.gathered.data
            data.select(self.gathered.selection, self.gathered.start_ns, self.gathered.end_ns,
                        self.gathered.single_host)


def analyze(data: TriageData, job: str | None = None, start_ns: int | None = None,
            end_ns: int | None = None) -> Triage:
    """Gather, collect evidence and decide for every job of the range, timing each stage."""
    timings: dict[str, float] = {}
    started = time.perf_counter()
    inputs = gather(data, job, start_ns, end_ns)
    timings.update(inputs[0].timings)
    timings["gather"] = time.perf_counter() - started
    results = []
    for gathered in inputs:
        gathered.start_ns, gathered.end_ns = start_ns, end_ns
        if len(inputs) > 1:
            data.select(gathered.selection, start_ns, end_ns, gathered.single_host)
        mark = time.perf_counter()
        evidence = collect(gathered)
        timings["evidence"] = timings.get("evidence", 0.0) + time.perf_counter() - mark
        mark = time.perf_counter()
        verdict = decide(evidence, data)
        timings["verdict"] = timings.get("verdict", 0.0) + time.perf_counter() - mark
        results.append(Triage(data.label, gathered.job, gathered.jobs, verdict, evidence, timings, gathered=gathered))
    results.sort(key=lambda t: -SEVERITY[t.verdict.status])  # stable: newest first among equals
    first = results[0]
    first.others = results[1:]
    if first.others:
        first.select()
    timings["total"] = time.perf_counter() - started
    return first


def analyze_table(table: pa.Table, job: str | None = None) -> Triage:
    """Triage an in-memory Arrow table of records (tests, the report of a parsed directory)."""
    return analyze(TriageData.from_table(table), job)
