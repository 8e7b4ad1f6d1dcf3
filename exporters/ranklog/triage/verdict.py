"""The verdict: which rank(s) failed first, why, and how sure we are.

Causal ordering that survives clock skew:

1. A record matching a *cause* signature (CUDA OOM, CUDA error, host OOM kill, non-finite
   loss/gradients) makes its rank a candidate. A driver or raylet record naming a killed worker
   (pid / actor name) is about that worker's rank.
2. Without one, an error that is not a known consequence (an uncaught exception, an NCCL error)
   is a candidate, unless it came after the first collective timeout by more than the clock
   uncertainty (then it is the aftermath: a peer closed the connection, the launcher gave up).
3. Without candidates, a rank that went silent before the others' timeouts is the suspect (a
   hang); failing that, a rank that lagged in NCCL sequence numbers or never reported the timeout
   the others reported.
4. Timeouts, actor deaths and raylet deaths are consequences: they name a root cause only when
   nothing else does, with low confidence.
5. What the writer recovers from is no candidate at all: a record announcing a retry ("… so the
   task will be retried", "retrying in 1s") and a consequence logged only as a WARNING.

Candidates are ordered by training step when every one of them has a step (a step count needs
no clock), else by time corrected with the per-host clock offsets. Candidates of the same
category at the same step, or within the clock uncertainty of the first, are reported together
(NaN gradients reach every rank in one allreduce). Confidence drops when a candidate of another
category on another host lies within the clock uncertainty, or when the verdict rests on silence
or on consequences only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..record import format_ts
from .evidence import SECOND, Evidence, Incident, Silent
from .gather import LAST_LINES, Line, Process, TriageData
from .straggler import MIN_SLOW as MIN_SLOW_STEPS
from .templates import describe_ranks

HIGH, MEDIUM, LOW = "high", "medium", "low"
LAST_LINES_EACH = 3  # a lost node's verdict shows this many last lines of each of its ranks
FAILURE = "failure"
DEGRADED = "degraded"  # no failure, but a rank (or the whole job) got slower: a straggler
NO_FAILURE = "no failure"
NO_DATA = "no data"


@dataclass
class Verdict:
    status: str  # "failure" | "degraded" | "no failure" | "no data"
    category: str | None
    ranks: list[int]
    hosts: list[str]
    summary: str
    confidence: str
    reasons: list[str] = field(default_factory=list)
    decisive: Line | None = None
    signature: str | None = None
    step: int | None = None
    before: list[Line] = field(default_factory=list)  # what the rank wrote just before `decisive` (or last)
    subject: Process | None = None  # the silent rank, when the verdict rests on silence
    subjects: list[Process] = field(default_factory=list)  # a lost node's ranks (their last lines: `before`)


def decide(evidence: Evidence, data: TriageData | None = None) -> Verdict:
    """The verdict for `evidence`; `data` (when given) supplies the lines before the decisive record."""
    if evidence.launcher_succeeded:  # the job said it ended well: only a lasting cause outweighs that
        verdict = _from_causes(evidence, lasting_only=True) or _healthy(evidence)
    else:
        verdict = (_from_causes(evidence) or _from_lost_node(evidence) or _from_errors(evidence)
                   or _from_flight_recorder(evidence) or _from_silence(evidence) or _from_seqnums(evidence)
                   or _from_consequences(evidence) or _healthy(evidence))
    if data is not None and verdict.decisive is not None:
        verdict.before = data.lines_before(verdict.decisive)
        if verdict.step is None and verdict.decisive.rank is not None:
            verdict.step = data.step_at(verdict.decisive)
    elif data is not None and (verdict.subjects or verdict.subject is not None):
        # a silent rank (or each rank of a lost node): its last lines, and the step it was in then
        steps = []
        for subject in verdict.subjects or [verdict.subject]:
            last = data.last_lines(subject, LAST_LINES_EACH if verdict.subjects else LAST_LINES)
            verdict.before += last
            steps.append(data.step_at(last[-1]) if last else None)
        verdict.before.sort(key=lambda line: line.ts)
        if any(step is not None for step in steps):
            verdict.step = max(step for step in steps if step is not None)
    if verdict.step is None and verdict.ranks:
        verdict.step = _reached_step(evidence, verdict.ranks)
    if verdict.status == NO_FAILURE and evidence.straggler is not None:
        verdict = _degraded(evidence, data)
    return verdict


def _degraded(evidence: Evidence, data: TriageData | None) -> Verdict:
    """No failure, but a rank (or the whole job) got slower (:mod:`.straggler`)."""
    slow = evidence.straggler
    assert slow is not None
    if slow.rank is None:
        return Verdict(DEGRADED, "slow-down", [], [], f"slow-down: every step {slow.job_factor:.1f}x as long from step "
                       f"{slow.first_step}", MEDIUM, [slow.describe(), "no rank stands out: look at what all ranks "
                                                      "share (storage, network, data, the cluster's load)"],
                       step=slow.first_step)
    summary = (f"rank {slow.rank} on {slow.host}: straggler from step {slow.first_step} "
               f"({slow.factor:.1f}x its peers' time per step)")
    reasons = [slow.describe(), "no failure: the slow rank holds every step of the job back at its collectives"]
    decisive = data.first_at_step(slow.host, slow.rank, slow.first_step) if data is not None else None
    verdict = Verdict(DEGRADED, "straggler", [slow.rank], [slow.host] if slow.host else [], summary,
                      HIGH if slow.slow_steps >= 2 * MIN_SLOW_STEPS else MEDIUM, reasons, decisive, None,
                      slow.first_step)
    if data is not None and decisive is not None:
        verdict.before = data.lines_before(decisive)
    return verdict


def _reached_step(evidence: Evidence, ranks: list[int]) -> int | None:
    """The step the blamed rank(s) had reached, when the decisive record names none (a driver's
    RayTaskError about a worker, a raylet's kill report): the lowest of their last steps."""
    steps = [p.last_step for p in evidence.processes if p.rank in ranks and p.last_step is not None]
    return min(steps) if steps else None


def _order_key(candidates: list[Incident]):
    with_steps = all(inc.line.step is not None for inc in candidates)
    return (lambda inc: (inc.line.step, inc.adj_ts)) if with_steps else (lambda inc: (inc.adj_ts,))


def _firsts(incidents: list[Incident]) -> list[Incident]:
    """The first incident of each subject (rank, or host for rank-less records). A rank's own record
    comes before another process's report about it (a controller's or driver's copy of its error, whose
    time may be a neighbour's): a report follows the event it reports."""
    seen: dict[tuple, Incident] = {}
    for inc in incidents:
        key = (inc.rank,) if inc.rank is not None else (None, inc.host)
        if key not in seen or _first_key(inc) < _first_key(seen[key]):
            seen[key] = inc
    return list(seen.values())


def _first_key(inc: Incident) -> tuple[bool, int]:
    return (inc.rank is not None and inc.line.rank != inc.rank, inc.adj_ts)


def _pick(candidates: list[Incident], evidence: Evidence, kind: str) -> Verdict:
    key = _order_key(candidates)
    ordered = sorted(candidates, key=key)
    primary = _with_step(ordered[0], evidence)
    ordered[0] = primary
    window = max(evidence.uncertainty_ns, SECOND)
    together = [primary] + [
        inc for inc in ordered[1:]
        if inc.category == primary.category and (
            (inc.line.step is not None and inc.line.step == primary.line.step)
            or abs(inc.adj_ts - primary.adj_ts) <= window)]
    rivals = [inc for inc in ordered[1:] if inc not in together and inc.category != primary.category
              and abs(inc.adj_ts - primary.adj_ts) <= window and inc.host != primary.host]
    ranks = sorted({inc.rank for inc in together if inc.rank is not None})
    # "unknown" (a file that names no machine, e.g. a driver's console) adds nothing beside a named host
    hosts = sorted({inc.host for inc in together} - {"unknown"}) or sorted({inc.host for inc in together})
    reasons = []
    category = primary.category or "unknown"
    who = describe_ranks(ranks) or "a process"  # the hosts follow in the summary
    step = f" at step {primary.line.step}" if primary.line.step is not None else ""
    context = f" ({', '.join(primary.context)})" if primary.context else ""
    summary = f"{who} on {', '.join(hosts)}: {category}{context}{step}"
    consequences = [inc for inc in _firsts(evidence.incidents) if inc.consequence and inc.rank not in ranks]
    if kind == "cause":
        reasons.append(f"{primary.signature.name if primary.signature else 'error'} is a cause, not a consequence "
                       f"of another rank's failure")
    else:
        reasons.append("the first error that is not a known consequence (timeout, actor/raylet death)")
    if consequences:
        victims = describe_ranks(inc.rank for inc in consequences)
        reasons.append(f"{victims or 'other processes'} then reported consequences "
                       f"({', '.join(sorted({inc.category for inc in consequences if inc.category}))})")
    if len(ordered) > len(together):
        later = [inc for inc in ordered if inc not in together]
        reasons.append(f"{len(later)} other candidate(s) came later: "
                       + "; ".join(f"{describe_ranks([inc.rank]) or inc.host} {inc.category}" for inc in later[:3]))
    if evidence.offsets:
        skew = ", ".join(f"{h} {off / SECOND:+.0f}s" for h, off in sorted(evidence.offsets.items()))
        reasons.append(f"clock offsets corrected using {evidence.offset_anchor}: {skew}")
    confidence = HIGH if kind == "cause" or (kind == "error" and consequences and len(ordered) == 1) else MEDIUM
    if rivals:
        confidence = MEDIUM if confidence == HIGH else LOW
        reasons.append("within the clock uncertainty of it: " + "; ".join(
            f"{describe_ranks([inc.rank]) or inc.host} {inc.category}" for inc in rivals[:3]))
    if kind != "cause" and not consequences and len(together) == 1 and not ranks:
        confidence = LOW
    return Verdict("failure", category, ranks, hosts, summary, confidence, reasons, primary.line,
                   primary.signature.name if primary.signature else None, primary.line.step)


def _with_step(primary: Incident, evidence: Evidence) -> Incident:
    """`primary`, or the record of the same event that names its step: the same subject's first
    incident of the same category within the clock uncertainty that carries a step (verl prints
    "grad_norm is not finite" just before the step's metrics line with the NaN)."""
    if primary.line.step is not None:
        return primary
    window = max(evidence.uncertainty_ns, SECOND)
    same = [inc for inc in evidence.incidents
            if inc.line.step is not None and inc.category == primary.category and inc.rank == primary.rank
            and inc.host == primary.host and abs(inc.adj_ts - primary.adj_ts) <= window]
    return min(same, key=lambda inc: (inc.adj_ts, inc.line.step)) if same else primary


def _from_causes(evidence: Evidence, lasting_only: bool = False) -> Verdict | None:
    strong = [inc for inc in evidence.incidents if inc.strong and not inc.handled
              and (not lasting_only or inc.signature.lasting)]
    # A raylet or kernel line and the driver's error naming the killed worker describe one event:
    # prefer the record that says which rank it hit.
    ranked = [inc for inc in strong if inc.rank is not None]
    return _pick(_firsts(ranked or strong), evidence, "cause") if strong else None


def _every_rank_finished(evidence: Evidence) -> bool:
    """Every rank (two or more) reached the same last step: the training itself ran to its end."""
    steps = {p.last_step for p in evidence.ranked_processes()}
    return len(evidence.ranked_processes()) >= 2 and len(steps) == 1 and None not in steps


def _from_errors(evidence: Evidence) -> Verdict | None:
    # An error of a rank-less process (a launcher, a controller) while every rank ran to its end is noise,
    # unless it is a cause in its own right (an OOM kill, a full disk).
    finished = _every_rank_finished(evidence)
    timeouts = [inc.adj_ts for inc in evidence.incidents if inc.consequence and not inc.handled]
    first_consequence = min(timeouts) if timeouts else None
    # An error is the aftermath of a consequence only against the same clock: a host's own first
    # consequence (its peers' "connection closed" after it failed) when it has one, so a node whose
    # clock runs ahead is not ruled out by consequences stamped by another node's clock.
    first_on_host: dict[str, int] = {}
    for inc in evidence.incidents:
        if inc.consequence:
            first_on_host[inc.line.host] = min(first_on_host.get(inc.line.host, inc.adj_ts), inc.adj_ts)
    window = max(evidence.uncertainty_ns, SECOND)
    last_ts = {(proc.host, proc.rank): proc.last_ts for proc in evidence.processes}
    errors = []
    for inc in evidence.incidents:
        if not inc.is_error or inc.consequence or inc.strong or inc.handled or (finished and inc.rank is None):
            continue
        loud = (inc.line.level in ("ERROR", "CRITICAL", "UNKNOWN")
                or inc.line.ts >= last_ts.get((inc.line.host, inc.line.rank), 0) - SECOND)  # the rank died of it
        if inc.signature is None and (inc.line.level not in ("ERROR", "CRITICAL") or first_consequence is None):
            continue  # an error without a signature counts only when something visibly failed
        if not loud:
            continue  # a handled exception logged as a warning, and the rank went on working
        after = first_on_host.get(inc.line.host, first_consequence)
        if after is not None and inc.adj_ts > after + window:
            continue
        errors.append(inc)
    ranked = [inc for inc in errors if inc.rank is not None]
    candidates = _firsts(ranked or errors)
    if not candidates:
        return None
    verdict = _pick(candidates, evidence, "error")
    if verdict.category == "unknown":
        verdict.confidence = LOW
    return verdict


def _silence_verdict(silent: list[Silent], evidence: Evidence, extra: list[str], why: str | None = None) -> Verdict:
    ranks = sorted(s.process.rank for s in silent if s.process.rank is not None)
    hosts = sorted({s.process.host for s in silent})
    first = max(silent, key=lambda s: s.quiet_ns)
    quiet = f"{first.quiet_ns / SECOND:.0f}s"
    why = why or f"quiet {quiet} before {first.reference}"
    summary = f"{describe_ranks(ranks)} on {', '.join(hosts)}: hang/silence ({why})"
    reasons = [f"{describe_ranks(ranks)} wrote nothing for {quiet} before {first.reference} and reported no "
               f"error of its own" if first.quiet_ns >= SECOND else
               f"{describe_ranks(ranks)} reported no error of its own", *extra]
    corroborated = set(ranks) & (set(evidence.seqnums.absent) | set(evidence.seqnums.laggards))
    if corroborated:
        reasons.append(f"NCCL evidence agrees: {describe_ranks(corroborated)} never reached the collective the "
                       f"others timed out on")
    confidence = MEDIUM if (corroborated or any(inc.consequence for inc in evidence.incidents)) else LOW
    if len(ranks) > max(1, len(evidence.ranked_processes()) // 2):
        confidence = LOW
    verdict = Verdict("failure", "hang/silence", ranks, hosts, summary, confidence, reasons, None, None,
                      first.process.last_step, subject=first.process)
    return verdict


def _from_lost_node(evidence: Evidence) -> Verdict | None:
    """A host whose processes all stopped at one moment, silently, while the others lost their peers
    or its agent went down with it (:mod:`.node_loss`): the node is the cause, its ranks the ones to
    name, never the victims."""
    if not evidence.lost:
        return None
    node = evidence.lost[0]
    ranks = node.ranks
    victims = sorted({inc.rank for inc in node.victims if inc.rank is not None})
    categories = ", ".join(sorted({inc.category for inc in node.victims if inc.category}))
    reasons = [f"every process of {node.host} ({describe_ranks(ranks)}) stopped at the same moment with no error of "
               f"its own, and nothing of the host logged afterwards"]
    if node.victims:
        reasons.append(f"{describe_ranks(victims) or 'processes of other hosts'} then reported losing peers "
                       f"({categories}): consequences of the lost node, not causes")
    if node.outage is not None:
        after = (node.outage.since_ns - node.last_ns) / 1e9
        reasons.append(f"the ranklog agent of {node.host} went down too (RanklogAgentDown from "
                       f"{format_ts(node.outage.since_ns)}, {after:.0f}s after its last record): the machine "
                       f"stopped, not only its processes")
        if not node.victims:
            reasons.append("no other host's rank got past the step it stopped in: the job waits for the node")
    if len(evidence.lost) > 1:
        reasons.append("other hosts lost too: " + ", ".join(n.host for n in evidence.lost[1:]))
    how = "stopped at once, silently" + ("; its agent went down" if node.outage is not None else "")
    summary = f"node {node.host} lost ({describe_ranks(ranks)} {how})"
    confident = node.victims or node.outage is not None
    return Verdict("failure", "node lost", ranks, [node.host], summary, HIGH if confident else MEDIUM, reasons,
                   subjects=node.processes)


def _from_flight_recorder(evidence: Evidence) -> Verdict | None:
    """Ranks whose flight recorder stops before a collective their peers entered (:mod:`.flight_recorder`)."""
    stuck = next((s for s in evidence.stuck if len(s.missing) <= len(s.entered)), None)
    chosen = [p for p in evidence.ranked_processes() if stuck is not None and p.rank in stuck.missing]
    if not chosen:
        return None
    reference = max((inc.adj_ts for inc in evidence.incidents if inc.consequence), default=None)
    silent = [Silent(p, max(0, reference - (p.last_ts - evidence.offsets.get(p.host, 0))) if reference else 0,
                     "its peers' collective timeouts") for p in chosen]
    why = f"never entered {stuck.op} #{stuck.seq}, flight recorder"
    verdict = _silence_verdict(silent, evidence, [stuck.describe() + " (torch's flight recorder dumps)"], why=why)
    verdict.confidence = HIGH
    return verdict


def _from_silence(evidence: Evidence) -> Verdict | None:
    return _silence_verdict(evidence.silent, evidence, []) if evidence.silent else None


def _from_seqnums(evidence: Evidence) -> Verdict | None:
    seq = evidence.seqnums
    suspects = seq.laggards or seq.absent
    if not suspects or len(suspects) > max(1, len(evidence.ranked_processes()) // 2):
        return None
    chosen = [p for p in evidence.ranked_processes() if p.rank in suspects]
    if not chosen:
        return None
    timed_out = sorted({inc.rank for inc in evidence.incidents if inc.consequence and inc.rank is not None})
    on_seq = f" on SeqNum={seq.majority}" if seq.majority is not None else ""
    why = (f"{describe_ranks(timed_out) or 'the others'} timed out{on_seq}; {describe_ranks(suspects)} "
           + ("reported a lower SeqNum" if seq.laggards else "reported no timeout"))
    latest_consequence = max(inc.adj_ts for inc in evidence.incidents if inc.consequence)
    silent = [Silent(p, max(0, latest_consequence - (p.last_ts - evidence.offsets.get(p.host, 0))),
                     "the last collective timeout") for p in chosen]
    verdict = _silence_verdict(silent, evidence, [why], why=why)
    verdict.confidence = MEDIUM if seq.majority is not None else LOW
    return verdict


def _from_consequences(evidence: Evidence) -> Verdict | None:
    # What a signature calls a consequence; not every later line of a rank that saw one.
    consequences = [inc for inc in evidence.incidents
                    if inc.signature is not None and inc.consequence and not inc.handled]
    if not consequences:
        return None
    verdict = _pick(_firsts(consequences), evidence, "consequence")
    verdict.confidence = LOW
    verdict.reasons.insert(0, "only consequences were found (timeouts, actor/raylet deaths): the rank that "
                              "caused them left no error; the earliest one is shown")
    return verdict


def _healthy(evidence: Evidence) -> Verdict:
    if not evidence.processes:
        return Verdict(NO_DATA, None, [], [], "no records in the selection", LOW,
                       ["nothing to judge: check the source, --job and the time range (--since/--start/--end)"])
    ranks = sorted(p.rank for p in evidence.ranked_processes() if p.rank is not None)
    reasons = [f"no failure signature, no silent rank among {len(ranks)} rank(s)"]
    if evidence.launcher_succeeded:
        hosts = sorted({host for host, _, _ in evidence.launcher})
        reasons = [f"the launcher reported success ({evidence.launcher[-1][2]!r} on {', '.join(hosts)}): that "
                   f"outweighs what the ranks logged on the way"]
    got_past = [inc for inc in evidence.incidents if inc.is_error and inc.recovered]
    if got_past:
        reasons.append(f"{describe_ranks(inc.rank for inc in got_past)} logged errors and went on to later steps "
                       f"(retried, recovered): noise, not a cause")
    if evidence.unclassified_errors:
        reasons.append(f"{evidence.unclassified_errors} ERROR record(s) match no failure signature "
                       f"(see the templates)")
    return Verdict(NO_FAILURE, None, [], [], "no failure found", HIGH if not evidence.unclassified_errors else MEDIUM,
                   reasons)
