"""Fixtures of the dashboards tests: the generated dashboards, rules and promtool test document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dashboards import GENERATED_DIR, PROMTOOL_TESTS

SCHEMA = Path(__file__).with_name("grafana_dashboard.schema.json")


@pytest.fixture(scope="session")
def generated_dashboards() -> dict[str, dict[str, Any]]:
    return {path.stem: json.loads(path.read_text()) for path in sorted((GENERATED_DIR / "dashboards").glob("*.json"))}


@pytest.fixture(scope="session")
def rules_doc() -> dict[str, Any]:
    return yaml.safe_load((GENERATED_DIR / "ranklog.rules.yml").read_text())


@pytest.fixture(scope="session")
def promtool_doc() -> dict[str, Any]:
    return yaml.safe_load(PROMTOOL_TESTS.read_text())


@pytest.fixture(scope="session")
def dashboard_schema() -> dict[str, Any]:
    return json.loads(SCHEMA.read_text())
