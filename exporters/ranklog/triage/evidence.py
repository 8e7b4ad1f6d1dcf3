"""Evidence: what the records say, before anyone judges which rank is to blame.

From the gathered incidents and per-rank summaries this module derives

- the failure signature of each incident and its template (:mod:`.templates`), grouped across ranks;
- per-host clock offsets, so that times from different nodes can be compared. Events that happen at
  the same real moment on every node anchor the estimate: the watchdog timeouts of one collective
  (same SeqNum, same timeout) when at least two hosts report them, otherwise the start of the job.
  Offsets below the anchor's own spread are treated as zero, and the spread is kept as the
  uncertainty of any cross-host comparison;
- the NCCL work sequence numbers each rank timed out on (``WorkNCCL(SeqNum=N``, ``last enqueued
  NCCL work: N``): ranks behind the majority, or absent while the others time out, lagged;
- silent ranks: ranks that wrote nothing from well before the others' timeouts (or, with no
  timeouts, stopped long before the others did);
- the timeline of the first incident of every rank.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from .. import signatures
from ..signatures import Signature
from .chain import classify
from .flight_recorder import Stuck
from .gather import KEYWORDS, Line, Process, TriageInput
from .node_loss import LostNode, lost_nodes
from .progress import step_matrix
from .straggler import Straggler, find, step_time_series
from .templates import template_of

SECOND = 1_000_000_000
MIN_UNCERTAINTY = 1 * SECOND
START_ANCHOR_TOLERANCE = 30 * SECOND  # ranks of a healthy job start within this of each other
SILENCE_MIN = 60 * SECOND  # with no timeouts, quiet for this long (and 20 typical gaps) is silence
# In a run that was ended (terminated, peers lost), a rank is the hang when the others went on after
# its last line for at least this part of the run (and a clock's uncertainty, and two of its own gaps).
QUIET_FRACTION = 0.1
STRONG_PRIORITY = 75  # signatures at or above this priority are causes in their own right

_SEQNUM = re.compile(r"SeqNum=(\d+)")
_LAST_ENQUEUED = re.compile(r"last enqueued (?:NCCL )?work:\s*(\d+)", re.IGNORECASE)
_TIMEOUT_MS = re.compile(r"Timeout\(ms\)=(\d+)|ran for (\d+) milliseconds|Timed out waiting (\d+)\s*ms|timeout of (\d+)\s*ms")
_PID = re.compile(r"\bpid[=:]\s*(\d+)", re.IGNORECASE)  # Ray: "(pid=123, ip=…)", "pid: 123", "Worker PID: 123"
# Failures of a whole node: the pids in their text (a raylet's dump of its last lines) are bystanders.
_NODE_LEVEL = frozenset({"raylet_died"})
_WORKER_ID = re.compile(r"\bworker[ _]id\s*(?:=|:)\s*([0-9a-f]{16,})", re.IGNORECASE)  # GCS/raylet: "worker id = …"
_ACTOR_NAME = re.compile(r"\bname[=:]\s*([\w.:\-]+)")
_KERNEL_KILL = re.compile(r"Killed process (\d+)")
_KEYWORDS = re.compile(KEYWORDS)
# The writer says it recovers or that the error is harmless ("… so the task will be retried", "retrying in
# 1s", "it's safe to ignore this error"): not a failure yet.
_RETRIED = re.compile(r"will be retried|\b[Rr]etrying\b|safe to ignore|can (?:safely )?be ignored")
# An entry of torchrun's failure summary ("[0]:\n  time : …\n  host : node0\n  rank : 1 (local_rank: 1)\n
#   exitcode : -9 (pid: 26251)") is about the rank it names.
_TORCHRUN_ROOT_CAUSE = re.compile(r"\[\d+\]:\s*time\s*:\s*\S+\s*host\s*:\s*(?P<host>\S+)\s*"
                                  r"rank\s*:\s*(?P<rank>\d+) \(local_rank: \d+\)")
# NCCL's "[Rank 3]", torch's "[rank3]:", Ray Train's controller "[Rank 2 Error Snippet]:"
_RANK_IN_TEXT = re.compile(r"\[Rank (\d+)(?: Error Snippet)?\]|^\[rank(\d+)\]:", re.MULTILINE)


@dataclass
class Incident:
    line: Line
    signature: Signature | None
    template: str
    adj_ts: int  # ts corrected by the host's clock offset
    rank: int | None  # the rank it is about (a victim named by a driver/raylet record, else the writer's)
    host: str
    aftermath: bool = False  # written after this rank's own timeout/peer loss: part of the consequence
    context: tuple[str, ...] = ()  # categories of the other exceptions of its chained traceback
    recovered: bool = False  # its rank reached a later step afterwards: it got past it (a retry worked)

    @property
    def category(self) -> str | None:
        return self.signature.category if self.signature else None

    @property
    def consequence(self) -> bool:
        return self.aftermath or bool(self.signature and self.signature.consequence)

    @property
    def strong(self) -> bool:
        return bool(self.signature and not self.signature.consequence and self.signature.priority >= STRONG_PRIORITY)

    @property
    def handled(self) -> bool:
        """The writer recovers from it: a retry notice, a consequence logged only as a WARNING, or an
        error its rank got past (it reached a later step)."""
        said = self.line.msg if not self.line.exc else f"{self.line.msg}\n{_exception_part(self.line.exc)}"
        return (self.recovered or _RETRIED.search(said) is not None
                or (self.consequence and self.line.level == "WARNING"))

    @property
    def is_error(self) -> bool:
        return self.signature is not None or self.line.level in ("ERROR", "CRITICAL")


def _exception_part(exc: str, lines: int = 3) -> str:
    """The last lines of a traceback: what the exception says, not the source lines it passed through."""
    return "\n".join(exc.rstrip().splitlines()[-lines:])


@dataclass
class TemplateGroup:
    template: str
    signature: str | None
    category: str | None
    consequence: bool
    count: int
    ranks: list[int]
    hosts: list[str]
    first: Incident
    examples: list[Line]


@dataclass
class SeqNums:
    by_rank: dict[int, int]  # lowest SeqNum each rank reported in a timeout
    majority: int | None
    laggards: list[int]  # reported a lower SeqNum than the majority
    absent: list[int]  # ranks with no timeout while others timed out
    timeout_ns: int | None  # the collective timeout, when the messages say it


@dataclass
class Silent:
    process: Process
    quiet_ns: int  # how long before the reference moment it went quiet
    reference: str  # what it is compared with


@dataclass
class Evidence:
    incidents: list[Incident]
    templates: list[TemplateGroup]
    timeline: list[Incident]  # first error-like incident per rank (or host), in corrected time order
    seqnums: SeqNums
    silent: list[Silent]
    offsets: dict[str, int]  # host -> clock offset (ns) subtracted from its times
    offset_anchor: str
    uncertainty_ns: int
    processes: list[Process]
    unclassified_errors: int
    notes: list[str] = field(default_factory=list)
    lost: list[LostNode] = field(default_factory=list)  # hosts whose processes all stopped at once, silently
    stuck: list[Stuck] = field(default_factory=list)  # collectives some ranks never entered (flight recorder)
    straggler: Straggler | None = None  # a rank (or the job) that got slower (.straggler)
    step_times: dict = field(default_factory=dict)  # the report's step-time plot (.straggler.step_time_series)
    launcher: list[tuple[str, bool, str]] = field(default_factory=list)  # (host, succeeded, line) per launcher report

    @property
    def launcher_succeeded(self) -> bool:
        """The launchers said the job ended well, and none said otherwise."""
        return bool(self.launcher) and all(ok for _, ok, _ in self.launcher)

    def ranked_processes(self) -> list[Process]:
        return [p for p in self.processes if p.rank is not None]


def collect(data: TriageInput) -> Evidence:
    """All evidence for `data` (see the module docstring)."""
    processes = data.processes
    classified = [classify(line.text) if _may_match(line) else (None, ()) for line in data.incidents]
    matched = [(line, sig) for line, (sig, _) in zip(data.incidents, classified, strict=True)]
    seqnums = _seqnums(matched, processes)
    offsets, anchor, uncertainty = _clock_offsets(matched, processes, seqnums)
    by_pid = _pid_index(processes)
    incidents = []
    for line, (sig, context) in zip(data.incidents, classified, strict=True):
        rank, host = _subject(line, sig, by_pid, data.worker_pids)
        adj = line.ts - offsets.get(line.host, 0)
        incidents.append(Incident(line, sig, template_of(line.msg), adj, rank, host, context=context))
    incidents.sort(key=lambda inc: inc.adj_ts)
    matrix = step_matrix(data.progress, data.single_host, offsets)
    _mark_recovered(incidents, matrix, max(uncertainty, MIN_UNCERTAINTY))
    _mark_aftermath(incidents)
    timeline = _timeline(incidents)
    silent = _silent(incidents, processes, offsets, seqnums)
    unclassified = sum(1 for inc in incidents if inc.signature is None and inc.line.level in ("ERROR", "CRITICAL"))
    return Evidence(incidents=incidents, templates=_templates(incidents), timeline=timeline, seqnums=seqnums,
                    silent=silent, offsets=offsets, offset_anchor=anchor, uncertainty_ns=uncertainty,
                    processes=processes, unclassified_errors=unclassified, notes=list(data.notes),
                    lost=lost_nodes(incidents, processes, offsets, uncertainty, data.outages), stuck=list(data.stuck),
                    straggler=(slow := find(matrix)), step_times=step_time_series(matrix, slow),
                    launcher=list(data.launcher))


def _may_match(line: Line) -> bool:
    """A plain warning without failure keywords cannot match a signature: skip the 15 regexes."""
    return line.level != "WARNING" or line.exc is not None or _KEYWORDS.search(line.msg) is not None


def _mark_recovered(incidents: list[Incident], matrix, margin_ns: int) -> None:
    """An error after which its rank reached a later step was got past (a retried upload, a storage
    hiccup, an OOM caught and retried with a smaller batch): noise, never a root cause. An error of a
    rank-less process (a launcher, Ray Train's controller) that every rank got past is noise too. Not
    a lasting cause: a NaN loss stays a failure while the run goes on."""
    if matrix is None:
        return
    for inc in incidents:
        if not inc.is_error or (inc.signature and inc.signature.lasting):
            continue
        if inc.rank is not None:
            inc.recovered = matrix.went_on(inc.host, inc.rank, inc.adj_ts, margin_ns)
        elif not inc.strong:  # a launcher's or controller's error: the job got past it if every rank did
            inc.recovered = all(matrix.went_on(host, rank, inc.adj_ts, margin_ns) for host, rank in matrix.keys)


def _mark_aftermath(incidents: list[Incident]) -> None:
    """Errors a rank writes once its own collective timed out or lost a peer (the watchdog's
    DistBackendError, "taking the entire process down") are consequences too; causes never are."""
    first: dict[tuple, int] = {}
    for inc in incidents:
        if inc.signature is not None and inc.signature.consequence and not inc.handled:
            first.setdefault((inc.rank, inc.host), inc.adj_ts)
            first.setdefault(("source", inc.line.source), inc.adj_ts)  # same stream, even without a rank
    for inc in incidents:
        began = min(first.get((inc.rank, inc.host), inc.adj_ts + 1), first.get(("source", inc.line.source),
                                                                                 inc.adj_ts + 1))
        if not inc.strong and inc.adj_ts >= began:
            inc.aftermath = True


# -- who an incident is about ---------------------------------------------------------------------------
def _pid_index(processes: list[Process]) -> dict[int, Process]:
    index: dict[int, Process] = {}
    for proc in processes:
        if proc.rank is None:
            continue
        for pid in proc.pids:
            index.setdefault(pid, proc)
    return index


def _subject(line: Line, sig: Signature | None, by_pid: dict[int, Process],
             worker_pids: dict[str, int] | None = None) -> tuple[int | None, str]:
    """The rank a record is about: a driver/raylet/GCS/kernel record naming a killed worker (its pid,
    its Ray worker id, its actor name) is about that worker's rank, not about the process that wrote it."""
    if line.rank is not None:
        return line.rank, line.host
    named = _RANK_IN_TEXT.search(line.msg)
    if named:  # NCCL's "[Rank 3]" / torch's "[rank3]:" name the global rank the parser could not place
        return int(named.group(1) or named.group(2)), line.host
    if sig is None or sig.name in _NODE_LEVEL:
        return None, line.host
    summary = _TORCHRUN_ROOT_CAUSE.search(line.text)
    if summary:
        return int(summary["rank"]), line.host
    for pattern in (_KERNEL_KILL, _PID):
        for match in pattern.finditer(line.text):
            victim = by_pid.get(int(match.group(1)))
            if victim is not None:
                return victim.rank, victim.host
    for match in _WORKER_ID.finditer(line.text) if worker_pids else ():
        victim = by_pid.get(worker_pids.get(match.group(1).lower(), -1))
        if victim is not None:
            return victim.rank, victim.host
    for match in _ACTOR_NAME.finditer(line.text):
        for proc in by_pid.values():
            if proc.role and proc.role == match.group(1):
                return proc.rank, proc.host
    return None, line.host


# -- templates -------------------------------------------------------------------------------------------
def _templates(incidents: list[Incident]) -> list[TemplateGroup]:
    groups: dict[str, list[Incident]] = defaultdict(list)
    for inc in incidents:
        groups[inc.template].append(inc)
    out = []
    for template, members in groups.items():
        first = min(members, key=lambda inc: inc.adj_ts)
        sig = Counter(inc.signature.name for inc in members if inc.signature).most_common(1)
        sig_obj = signatures.BY_NAME[sig[0][0]] if sig else None
        out.append(TemplateGroup(
            template=template, signature=sig_obj.name if sig_obj else None,
            category=sig_obj.category if sig_obj else None, consequence=all(inc.consequence for inc in members),
            count=len(members), ranks=sorted({inc.rank for inc in members if inc.rank is not None}),
            hosts=sorted({inc.host for inc in members}), first=first,
            examples=[inc.line for inc in members[:3]]))
    # Causes first (by signature priority), then by how many ranks printed it.
    out.sort(key=lambda g: (-(signatures.BY_NAME[g.signature].priority if g.signature else 0) if not g.consequence
                            else 0, g.consequence, -len(g.ranks), -g.count, g.first.adj_ts))
    return out


# -- NCCL sequence numbers ----------------------------------------------------------------------------------
def _seqnums(matched: list[tuple[Line, Signature | None]], processes: list[Process]) -> SeqNums:
    by_rank: dict[int, int] = {}
    timeouts_ms: list[int] = []
    timed_out: set[int] = set()
    for line, sig in matched:
        if sig is None or sig.category != "NCCL/collective timeout":
            continue
        if line.rank is not None:
            timed_out.add(line.rank)
        for pattern in (_SEQNUM, _LAST_ENQUEUED):
            for found in pattern.finditer(line.text):
                if line.rank is not None:
                    value = int(found.group(1))
                    by_rank[line.rank] = min(value, by_rank.get(line.rank, value))
        for found in _TIMEOUT_MS.finditer(line.text):
            timeouts_ms.append(int(next(g for g in found.groups() if g)))
    majority = Counter(by_rank.values()).most_common(1)[0][0] if by_rank else None
    laggards = sorted(r for r, seq in by_rank.items() if majority is not None and seq < majority)
    ranks = {p.rank for p in processes if p.rank is not None}
    absent = sorted(ranks - timed_out) if timed_out else []
    timeout_ns = min(timeouts_ms) * 1_000_000 if timeouts_ms else None
    return SeqNums(by_rank, majority, laggards, absent, timeout_ns)


# -- clocks --------------------------------------------------------------------------------------------------
def _clock_offsets(matched: list[tuple[Line, Signature | None]], processes: list[Process],
                   seqnums: SeqNums) -> tuple[dict[str, int], str, int]:
    """Per-host offsets from events that happen at the same real time everywhere (see module doc)."""
    anchors: dict[str, list[int]] = defaultdict(list)
    seen_ranks: set[tuple[str, int | None]] = set()
    for line, sig in matched:
        if sig is None or sig.category != "NCCL/collective timeout" or (line.host, line.rank) in seen_ranks:
            continue
        seq = _SEQNUM.search(line.text)
        if seqnums.majority is not None and seq and int(seq.group(1)) != seqnums.majority:
            continue
        seen_ranks.add((line.host, line.rank))
        anchors[line.host].append(line.ts)
    anchor = "the collective timeouts"
    tolerance = MIN_UNCERTAINTY
    if len(anchors) < 2:
        anchors = defaultdict(list)
        for proc in processes:
            if proc.rank is not None:
                anchors[proc.host].append(proc.first_ts)
        anchor = "the start of the job"
        tolerance = START_ANCHOR_TOLERANCE
    if len(anchors) < 2:
        return {}, "none (one host)", MIN_UNCERTAINTY
    medians = {host: int(statistics.median(values)) for host, values in anchors.items()}
    spread = max(max(values) - min(values) for values in anchors.values())
    reference = int(statistics.median(medians.values()))
    threshold = max(tolerance, spread)
    offsets = {host: median - reference for host, median in medians.items() if abs(median - reference) > threshold}
    return offsets, anchor, max(MIN_UNCERTAINTY, spread)


# -- timeline and silence -------------------------------------------------------------------------------------
def _timeline(incidents: list[Incident]) -> list[Incident]:
    first: dict[tuple[int | None, str | None], Incident] = {}
    for inc in incidents:
        if not inc.is_error:
            continue
        key = (inc.rank, inc.host if inc.rank is None else None)
        if key not in first:
            first[key] = inc
    return sorted(first.values(), key=lambda inc: inc.adj_ts)


def _silent(incidents: list[Incident], processes: list[Process], offsets: dict[str, int],
            seqnums: SeqNums) -> list[Silent]:
    ranked = [p for p in processes if p.rank is not None]
    if len(ranked) < 2:
        return []
    errored = {inc.rank for inc in incidents if inc.is_error and inc.rank is not None}
    timeouts = [inc for inc in incidents if inc.category == "NCCL/collective timeout" and inc.rank is not None]
    out: list[Silent] = []
    if timeouts:
        # Others' first timeout minus the timeout is when the collective began; a rank with no error
        # of its own whose last record is no later than that never joined the collective.
        first_timeout = min(inc.adj_ts for inc in timeouts)
        began = first_timeout - (seqnums.timeout_ns or 0)
        for proc in ranked:
            if proc.rank in errored:
                continue
            last = proc.last_ts - offsets.get(proc.host, 0)
            if last <= began + MIN_UNCERTAINTY or (seqnums.timeout_ns is None and last < first_timeout):
                out.append(Silent(proc, first_timeout - last, "the first collective timeout"))
        return out
    if any(inc.consequence for inc in incidents):
        return _stopped_first(incidents, ranked, offsets)
    lasts = sorted(p.last_ts - offsets.get(p.host, 0) for p in ranked)
    reference = int(statistics.median(lasts))
    for proc in ranked:
        last = proc.last_ts - offsets.get(proc.host, 0)
        typical_gap = (proc.last_ts - proc.first_ts) // max(1, proc.records - 1)
        if reference - last > max(SILENCE_MIN, 20 * typical_gap) and proc.rank not in errored:
            out.append(Silent(proc, reference - last, "the other ranks' last records"))
    return out


def _stopped_first(incidents: list[Incident], ranked: list[Process], offsets: dict[str, int]) -> list[Silent]:
    """In a run that was ended from outside or fell apart (no timeout of its own), the rank that went
    quiet first while the others went on for a meaningful part of the run: it is where the run hung.

    A rank that failed with an error of its own is not silent (its error speaks), and the others'
    going on must be more than clock noise (a second) and tell of progress the rank did not make:
    they reached a later training step than its last one (synchronous training advances all ranks
    together), or, without steps, they went on for :data:`QUIET_FRACTION` of the run and two of the
    rank's own typical gaps between records.
    """
    caused = {inc.rank for inc in incidents if inc.is_error and not inc.consequence and inc.rank is not None}
    last = {id(p): p.last_ts - offsets.get(p.host, 0) for p in ranked}
    first = min(p.first_ts - offsets.get(p.host, 0) for p in ranked)
    earliest = min(ranked, key=lambda p: last[id(p)])
    if earliest.rank in caused:
        return []
    others = [p for p in ranked if p is not earliest]
    went_on = min(last[id(p)] for p in others) - last[id(earliest)]
    if went_on < MIN_UNCERTAINTY:
        return []
    steps = [p.last_step for p in others]
    behind = earliest.last_step is not None and None not in steps and earliest.last_step < min(steps)
    span = max(last.values()) - first
    typical_gap = (earliest.last_ts - earliest.first_ts) // max(1, earliest.records - 1)
    if behind or went_on >= max(QUIET_FRACTION * span, 2 * typical_gap):
        return [Silent(earliest, went_on, "the other ranks' last records")]
    return []
