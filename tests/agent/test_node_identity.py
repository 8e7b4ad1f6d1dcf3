"""The agent labels records with the identity it knows across its node's files: a torchrun rank file
(which names only its local rank) takes the global rank its launcher's console pairs with it, in the
records it ships and in ``ranklog_log_records_total{rank}`` — with the reading thread parsing and
with parse worker processes. The lines are torchrun's and the worker's own (the scenario library's
torchrun_hang_two_nodes, node1: local ranks 0 and 1 are global ranks 2 and 3, and no line of the rank
files names its rank)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from ranklog.query import engine
from ranklog.query.filters import QuerySpec
from ranklog.query.sources import open_source
from ranklog.triage.gather import TriageData, gather
from tests.agent.conftest import wait_archived
from tests.helpers.agent_proc import running_agent

NODE1 = Path(__file__).resolve().parents[1] / "scenarios" / "torchrun_hang_two_nodes" / "out" / "node1"
RANK_FILE = next(NODE1.glob("job_*/attempt_0/1/stdout.log"))


def _console_head() -> bytes:
    """The launcher's console up to its first worker line: the launch config and the rendezvous result."""
    data = (NODE1 / "torchrun.console.log").read_bytes()
    return data[:data.index(b"[default0]:")]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_rank_file_written_after_the_rendezvous_is_labelled_with_its_global_rank(tmp_path, archive, token_file,
                                                                                   workers):
    logs = tmp_path / "logs" / "node1"
    logs.mkdir(parents=True)
    (logs / "torchrun.console.log").write_bytes(_console_head())
    with running_agent(archive.url, token_file, tmp_path / "state", sources=[f"{tmp_path / 'logs'}/**/*"],
                       extra_args=["--host", "node1", "--parse-workers", workers]) as agent:
        agent.wait_idle(timeout=60)
        time.sleep(1.5)  # the node's identity join runs at most once a second
        target = logs / RANK_FILE.relative_to(NODE1)
        target.parent.mkdir(parents=True)
        shutil.copyfile(RANK_FILE, target)
        scrape = agent.wait_idle(timeout=60)
    job_rank_file_records = scrape.value("ranklog_log_records_total", training_job="job")
    assert job_rank_file_records > 0
    assert scrape.value("ranklog_log_records_total", training_job="job", rank="3") == job_rank_file_records
    stored = wait_archived(tmp_path / "archive", 1, columns=("source", "rank"))
    ranks = {rank for source, rank in zip(stored.column("source").to_pylist(), stored.column("rank").to_pylist(),
                                          strict=True) if source == str(target)}
    assert ranks == {3}


@pytest.mark.parametrize("workers", ["1", "2"])
def test_what_the_agent_learns_after_shipping_reaches_the_archive_and_its_readers(tmp_path, archive, token_file,
                                                                                  workers):
    """The rank file is complete and shipped before the launcher's console appears: its records go
    without a global rank; the agent's identity notice tells the archive, whose readers join it."""
    logs = tmp_path / "logs" / "node1"
    target = logs / RANK_FILE.relative_to(NODE1)
    target.parent.mkdir(parents=True)
    shutil.copyfile(RANK_FILE, target)
    with running_agent(archive.url, token_file, tmp_path / "state", sources=[f"{tmp_path / 'logs'}/**/*"],
                       extra_args=["--host", "node1", "--parse-workers", workers]) as agent:
        agent.wait_idle(timeout=60)
        (logs / "torchrun.console.log").write_bytes(_console_head())
        agent.wait_idle(timeout=60)
        time.sleep(2.0)  # the join runs at most once a second; its notice is a request of its own
    stored = wait_archived(tmp_path / "archive", 1, columns=("source", "rank"))
    mine = [rank for source, rank in zip(stored.column("source").to_pylist(), stored.column("rank").to_pylist(),
                                         strict=True) if source == str(target)]
    assert mine and None in mine  # shipped before the agent knew
    source = open_source(archive=str(tmp_path / "archive"))
    joined = engine.read(source, QuerySpec(ranks=(3,)), ["source"])
    assert joined.column("source").to_pylist().count(str(target)) == len(mine)
    data = TriageData.from_source(source)  # triage reads the Parquet files itself, and the map
    gather(data)
    assert data.query("SELECT DISTINCT rank FROM all_records WHERE source = ?", [str(target)]) == [(3,)]
