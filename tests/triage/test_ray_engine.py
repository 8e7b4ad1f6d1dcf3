"""``ranklog triage --engine ray``: the archive read by Ray tasks on a real cluster, the same verdict.

Real tools' output (the scenario library: a two-node torchrun hang, a verl worker group on Ray) is
parsed and stored by the archive's own writer, several files per hour; triage with ``--engine ray``
(address from ``RAY_ADDRESS``) must print exactly the local engine's result — verdict, evidence,
everything but the timings — and that result must be the scenario's truth.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.helpers.procs import REPO, ranklog_cmd
from tests.helpers.query_data import write_archive
from tests.helpers.triage_exit import assert_exit
from tests.query.test_ray_engine import nodes_in
from tests.scenarios.harness import ROOT, load

pytestmark = pytest.mark.slow  # a Ray cluster (once per session) and two triage processes per scenario


def _triage(root, env: dict[str, str] | None = None, *flags: str) -> tuple[dict, str]:
    done = subprocess.run(ranklog_cmd("triage", "--archive", str(root), "--json", *flags), capture_output=True,
                          text=True, timeout=300, cwd=REPO, env={**os.environ, **(env or {})})
    assert done.returncode in (0, 1, 3), done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert_exit(done.returncode, result)
    result.pop("timings_s")
    return result, done.stderr


def test_verdicts_are_the_local_engines(tmp_path, ray_cluster):
    from ranklog.parse.directory import read_log_dir

    nodes: set[str] = set()
    for name in ("torchrun_hang_two_nodes", "ray_verl_worker_group"):
        scenario = load(ROOT / name)
        root = tmp_path / name
        write_archive(read_log_dir(str(scenario.out)), root, files_per_hour=6)
        local, _ = _triage(root)
        distributed, stderr = _triage(root, {**ray_cluster.env, "RAY_ADDRESS": ray_cluster.address}, "--engine", "ray")
        assert distributed == local, name
        nodes |= nodes_in(stderr)
        verdict, truth = local["verdict"], scenario.truth
        assert (verdict["status"] != "no failure") == truth.failure, name
        if truth.failure:
            assert verdict["ranks"][:1] == [truth.rank] and verdict["category"] == truth.category, name
    assert nodes == {node[:8] for node in ray_cluster.node_ids}
