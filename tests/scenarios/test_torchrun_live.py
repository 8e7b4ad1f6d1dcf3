"""One torchrun scenario generated live on every run: a change in what torchrun writes (its
``--log-dir`` tree, the ``[default0]:`` console, the rendezvous lines, ``error.json``, the failure
summary) shows up here as a failing test, not as silently wrong records in the checked-in output.

The two-node uncaught exception is the one run: it crosses the torchrun joins triage relies on
(global rank from the rendezvous result, host from the per-node --log-dir, the step the rank was
at). Its generator runs into a copy of the scenario, so the checked-in output stays as it was; triage
is then judged on both paths like every scenario. About 20–40 s on 2 loaded cores.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.procs import REPO
from tests.scenarios.harness import judge, load, triage_archive, triage_raw

SCENARIO = Path(__file__).resolve().parent / "torchrun_exception"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("torch", reason="torch comes with the torch extra")
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("the generator's nodes are namespaces: needs root and util-linux's unshare")
    copy = tmp_path_factory.mktemp("live") / SCENARIO.name
    shutil.copytree(SCENARIO / "gen", copy / "gen")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "exporters")])}
    done = subprocess.run([sys.executable, str(copy / "gen" / "generate.py")], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return load(copy)


def test_live_torchrun_output_has_the_pieces_triage_joins(live):
    node1 = live.out / "node1"
    console = (node1 / "torchrun.console.log").read_text()
    assert "group_rank=1" in console and "global_ranks=[2, 3]" in console
    assert "[default1]:[rank3]: ValueError: sample 1834" in console
    assert list(node1.glob("job_*/attempt_0/1/error.json"))
    assert list(node1.glob("job_*/attempt_0/1/stderr.log"))


@pytest.mark.parametrize("path", ["raw", "archive"])
def test_live_torchrun_verdict(live, path, tmp_path):
    result = triage_raw(live) if path == "raw" else triage_archive(live, tmp_path)
    marks = judge(live.truth, result)
    assert all(marks.values()), (marks, result["verdict"]["summary"])
