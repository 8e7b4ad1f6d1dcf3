"""Fixtures of the reliability suite: a scenario recorder that feeds RELIABILITY.md."""

from __future__ import annotations

import os

import pytest

from tests.reliability import report

_ROWS: list[report.Row] = []
SOAK = os.environ.get("RANKLOG_SOAK") == "1"


@pytest.fixture
def record_row():
    """Call with a report.Row; the row is marked passed only if the test then passes."""
    rows: list[report.Row] = []
    yield rows.append
    _ROWS.extend(rows)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    result = outcome.get_result()
    if result.when == "call":
        item._reliability_passed = result.passed


@pytest.fixture(autouse=True)
def _mark_rows_passed(request):
    before = len(_ROWS)
    yield
    passed = getattr(request.node, "_reliability_passed", False)
    for row in _ROWS[before:]:
        row.passed = passed


def pytest_sessionfinish(session, exitstatus):
    if _ROWS:
        report.write(_ROWS)
