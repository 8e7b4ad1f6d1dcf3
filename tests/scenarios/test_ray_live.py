"""One Ray scenario generated live on every run: a change in what Ray writes shows up here as a
failing test, not as silently wrong records in the checked-in scenarios.

The verl-style worker group is the one run: it crosses every join the Ray triage relies on (the
driver's RayTaskError names only ``pid=…``; the worker's JSON lines carry ``actor_name`` and the
``[Rank N]`` prefix; the raylet names the host). Its generator runs into a copy of the scenario, so
the checked-in output stays as it was; triage is then judged on both paths like every scenario.
About 15–30 s on 2 loaded cores (Ray's start-up dominates).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.scenarios.harness import judge, load, triage_archive, triage_raw
from tests.scenarios.ray_gen import run

SCENARIO = Path(__file__).resolve().parent / "ray_verl_worker_group"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("ray", reason="Ray comes with the test extra")
    copy = tmp_path_factory.mktemp("live") / SCENARIO.name
    shutil.copytree(SCENARIO / "gen", copy / "gen")
    shutil.copy(SCENARIO / "truth.json", copy / "truth.json")
    ray_run = run(copy)
    assert ray_run.exit_code == 1, "the driver should die of the worker's RayTaskError"
    scenario = load(copy)
    # The truth's node is the machine that generated it; live, that is this machine.
    return scenario, ray_run.host


def _expected(scenario, host):
    from dataclasses import replace

    return replace(scenario.truth, node=host)


def test_live_ray_output_has_the_joined_pieces(live):
    scenario, host = live
    node = scenario.out / host
    console = re.sub(r"\x1b\[[0-9;]*m", "", (node / "driver-console.log").read_text(errors="replace"))
    assert "RayTaskError(RuntimeError): ray::WorkerDict.generate_sequences() (pid=" in console
    workers = list(node.glob("session_*/logs/worker-*.err"))
    assert any('"actor_name": "kZ3xWqWorkerDict_0:1"' in p.read_text() for p in workers)
    assert any("hostname: " in p.read_text() for p in node.glob("session_*/logs/raylet.out"))


@pytest.mark.parametrize("path", ["raw", "archive"])
def test_live_ray_verdict(live, path, tmp_path):
    scenario, host = live
    result = triage_raw(scenario) if path == "raw" else triage_archive(scenario, tmp_path)
    verdict = judge(_expected(scenario, host), result)
    assert all(verdict.values()), _explain(verdict, result)


def _explain(marks: dict, result: dict) -> str:
    """What a failing live run needs to be understood afterwards: the verdict's decisive record
    (which line of which file) and the first error of each leading template."""
    verdict = result["verdict"]
    decisive = verdict.get("decisive") or {}
    lines = [f"marks {marks}", f"verdict {verdict['summary']!r}, ranks {verdict['ranks']}, hosts {verdict['hosts']}",
             f"decisive {decisive.get('source')}@{decisive.get('offset')}: {(decisive.get('msg') or '')[:300]!r}"]
    for template in result["evidence"]["templates"][:5]:
        first = template["first"]
        lines.append(f"  {first['ts']} {template['category']} ranks={template['ranks']} hosts={template['hosts']} "
                     f"{template['template'][:160]!r}")
    return "\n".join(lines)
