"""Triage is right on every checked-in Ray scenario (real Ray 2.60 output), on both paths a user has:
``ranklog triage --log_dir`` on the copied folder, and agent → archive → ``ranklog triage --archive``.

The raw path takes about a second per scenario; the archive path starts a real archive and agent
per scenario (a few seconds each) and is marked slow. One Ray scenario is also regenerated live on
every run (test_ray_live.py).
"""

from __future__ import annotations

import pytest

from tests.scenarios.harness import judge, scenarios, triage_archive, triage_raw

RAY = [s for s in scenarios() if s.name.startswith("ray_")]


def test_the_ray_library_is_there():
    assert len(RAY) >= 9


@pytest.mark.parametrize("scenario", RAY, ids=lambda s: s.name)
def test_raw_folder(scenario):
    result = triage_raw(scenario)
    marks = judge(scenario.truth, result)
    assert all(marks.values()), (marks, result["verdict"]["summary"])


@pytest.mark.slow
@pytest.mark.parametrize("scenario", RAY, ids=lambda s: s.name)
def test_agent_archive(scenario, tmp_path):
    result = triage_archive(scenario, tmp_path)
    marks = judge(scenario.truth, result)
    assert all(marks.values()), (marks, result["verdict"]["summary"])
