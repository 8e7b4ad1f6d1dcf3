"""Every scenario of the library gets the verdict its truth says, from the raw folder and through
real agents into a real archive (the accuracy table of bench_triage_accuracy.py, as assertions).

The raw path runs triage in this process (the command line's own path is what the archive tests and
the benchmark run); the archive path starts a real archive and one real agent per node, about 10 s
a scenario on 2 loaded cores, so it is marked slow.
"""

from __future__ import annotations

import pytest

from ranklog.query.sources import open_source
from ranklog.triage.analyze import analyze
from ranklog.triage.gather import TriageData
from ranklog.triage.present import to_dict
from tests.scenarios.harness import judge, scenarios, triage_archive

# The Ray scenarios are judged the same way by test_ray_scenarios.py (once is enough: the archive
# path costs ~10 s a scenario).
SCENARIOS = [s for s in scenarios() if not s.name.startswith("ray_")]


def _raw(scenario) -> dict:
    return to_dict(analyze(TriageData.from_source(open_source(log_dir=str(scenario.out)))))


def _assert_right(scenario, result: dict) -> None:
    marks = judge(scenario.truth, result)
    wrong = [field for field, ok in marks.items() if not ok]
    assert not wrong, f"{scenario.name}: wrong {wrong}; verdict {result['verdict']['summary']!r}, truth {scenario.truth}"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_raw_folder_verdict(scenario):
    _assert_right(scenario, _raw(scenario))


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_agent_archive_verdict(scenario, tmp_path):
    _assert_right(scenario, triage_archive(scenario, tmp_path))
