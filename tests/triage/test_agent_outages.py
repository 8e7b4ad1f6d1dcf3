"""A lost node seen with its agent's outage (``RanklogAgentDown``) as evidence, on real runs.

The records are what the archive holds at the moment triage runs: the scenario's files as the
tools wrote them, each host's cut at a moment (``as_shipped``: every file truncated at the first
record after it, found through the records' byte offsets). ``torchrun_node_lost`` cut one second
after node1 died is the archive's view before the peers' errors make the picture plain — with NCCL
that view lasts until the collective timeout, 10 to 30 minutes, because nothing else is written.
The outage is what Alertmanager would send: the alert starts two and a half minutes (the rule's
``for``, a scrape and an evaluation) after the agent died with its machine.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow.compute as pc
import pytest

from ranklog.agent_outages import AgentOutage, outage_host, same_host
from ranklog.parse.directory import read_log_dir
from ranklog.query.sources import open_source
from ranklog.record import NS_PER_TS
from ranklog.triage.analyze import analyze
from ranklog.triage.gather import TriageData
from tests.scenarios.harness import ROOT
from tests.scenarios.library import restore_mtimes

SECOND = 1_000_000_000
ALERT_DELAY = 150 * SECOND


def as_shipped(scenario: str, dest: Path, cuts: dict[str, int] | None = None) -> Path:
    """A copy of `scenario`'s out/ where host H's files end before its first record after cuts[H] (ns)."""
    restore_mtimes(ROOT / scenario)
    shutil.copytree(ROOT / scenario / "out", dest)
    table = read_log_dir(str(dest))
    ts = [t * NS_PER_TS for t in pc.cast(table["ts"], "int64").to_pylist()]
    keep: dict[str, int] = {}
    for host, path, offset, when in zip(table["host"].to_pylist(), table["source"].to_pylist(),
                                        table["offset"].to_pylist(), ts, strict=True):
        if cuts and host in cuts and when > cuts[host]:
            keep[path] = min(keep.get(path, offset), offset)
    for path, size in keep.items():
        stat = os.stat(path)
        os.truncate(path, size)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    return dest


def triage(folder: Path, outages: list[AgentOutage] = (), end_ns: int | None = None):
    data = TriageData.from_source(open_source(log_dir=str(folder)))
    data.agent_outages = list(outages)
    return analyze(data, None, None, end_ns)


def host_end(result, host: str) -> int:
    return max(p.last_ts for p in result.evidence.processes if p.host == host and p.rank is not None)


@pytest.mark.parametrize(("peers_cut", "before_alone"), [
    (-0.5, "no failure found"),  # node0's ranks still wait in the all_reduce: nothing says anything yet
    (1.0, "ranks 0-1 on node0: NCCL error"),  # their gloo errors arrived, node0's launcher has not spoken
])
def test_the_agent_down_names_the_lost_node_before_the_logs_can(tmp_path, peers_cut, before_alone):
    died = host_end(triage(ROOT / "torchrun_node_lost" / "out"), "node1")
    folder = as_shipped("torchrun_node_lost", tmp_path / "out",
                        {"node0": died + int(peers_cut * SECOND), "node1": died + SECOND})
    assert triage(folder).verdict.summary == before_alone  # the logs alone: a hang, or the victims blamed
    verdict = triage(folder, [AgentOutage("node1", died + ALERT_DELAY)]).verdict
    assert (verdict.category, verdict.ranks, verdict.hosts, verdict.confidence) == ("node lost", [2, 3], ["node1"],
                                                                                    "high")
    assert "its agent went down" in verdict.summary and {line.rank for line in verdict.before} == {2, 3}
    assert any("agent of node1 went down too" in r for r in verdict.reasons)
    if peers_cut < 0:
        assert any("got past the step it stopped in" in r for r in verdict.reasons)


def test_the_agent_down_corroborates_a_node_its_peers_lost():
    plain = triage(ROOT / "torchrun_node_lost" / "out")
    outage = AgentOutage("node1.cluster.local", host_end(plain, "node1") + ALERT_DELAY)
    verdict = triage(ROOT / "torchrun_node_lost" / "out", [outage]).verdict
    assert (verdict.category, verdict.ranks, verdict.hosts) == (plain.verdict.category, [2, 3], ["node1"])
    assert any("ranks 0-1 then reported losing peers" in r for r in verdict.reasons)
    assert any("agent of node1 went down too" in r for r in verdict.reasons)


def test_an_outage_that_does_not_follow_the_nodes_last_record_is_no_evidence(tmp_path):
    """An agent that went down and came back (its ranks' lines arrive after), one that went down long
    after the node went quiet, and the victims' host's agent: the verdict stays the logs' own."""
    plain = triage(ROOT / "torchrun_node_lost" / "out")
    died = host_end(plain, "node1")
    folder = as_shipped("torchrun_node_lost", tmp_path / "out", {"node0": died - SECOND // 2, "node1": died + SECOND})
    alone = triage(folder).verdict
    for outage in (AgentOutage("node1", died - 30 * SECOND, died - 20 * SECOND),
                   AgentOutage("node1", died + 3600 * SECOND),
                   AgentOutage("node0", host_end(plain, "node0") + ALERT_DELAY)):
        verdict = triage(folder, [outage]).verdict
        assert (verdict.category, verdict.ranks) == (alone.category, alone.ranks), outage


def test_a_crashed_agent_on_a_healthy_node_is_no_lost_node(tmp_path):
    """node1's agent dies at step 5 of a job that goes on: node1's shipped records stop at once, as a
    dead node's would, but node0's ranks went on to later steps, which a synchronous job cannot do
    without node1's ranks. Triage runs before the job ends (no launcher has said it succeeded)."""
    full = triage(ROOT / "torchrun_straggler" / "out")
    steps = full.evidence.processes
    start = min(p.first_ts for p in steps if p.rank is not None)
    end = max(p.last_ts for p in steps if p.rank is not None)
    agent_died, now = start + (end - start) // 2, start + 3 * (end - start) // 4
    folder = as_shipped("torchrun_straggler", tmp_path / "out", {"node1": agent_died, "node0": now})
    result = triage(folder, [AgentOutage("node1", agent_died + ALERT_DELAY)])
    lasts = {p.rank: p.last_step for p in result.evidence.processes if p.rank is not None}
    assert max(lasts[0], lasts[1]) > max(lasts[2], lasts[3]) + 1, lasts  # the cut left node0 ahead
    assert result.evidence.lost == [] and result.verdict.category != "node lost"


def test_an_alerts_host_is_its_node_label_or_its_instance_without_the_port():
    assert outage_host({"node": "node1", "instance": "10.0.0.5:9465"}) == "node1"
    assert outage_host({"instance": "node1:9465"}) == "node1"
    assert outage_host({"instance": "[fd00::5]:9465"}) == "fd00::5"
    assert outage_host({"alertname": "RanklogAgentDown"}) is None
    assert same_host("node1", "NODE1.cluster.local") and not same_host("node1", "node10")
