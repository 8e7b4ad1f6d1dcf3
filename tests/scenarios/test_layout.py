"""Every scenario has what the convention asks for: a generator, real output per node, a valid truth, a README."""

from __future__ import annotations

import pytest

from ranklog.signatures import CATEGORIES
from tests.scenarios.harness import scenarios

SCENARIOS = scenarios()


def test_library_is_not_empty():
    assert len(SCENARIOS) >= 2


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_scenario_layout_and_truth(scenario):
    assert scenario.generator().is_file(), "no gen/generate.py"
    assert (scenario.path / "README.md").is_file()
    assert scenario.nodes(), "out/ holds no node folder"
    files = [p for p in scenario.out.rglob("*") if p.is_file()]
    assert files and any(p.stat().st_size for p in files), "out/ holds no output"
    truth = scenario.truth
    assert truth.status in (None, "degraded"), truth.status
    if truth.failure or truth.status == "degraded":
        assert truth.category in CATEGORIES, truth.category
        assert truth.node is None or truth.node in scenario.nodes(), f"truth node {truth.node} has no folder in out/"
        assert truth.decisive, "a failure's truth names its decisive line"
        decisive_found = any(truth.decisive in p.read_text(errors="replace") for p in files)
        assert decisive_found, f"{truth.decisive!r} appears in no output file"
    else:
        assert truth.rank is None and truth.category is None
