"""Shared paths of the deploy tests (no containers: lint, specs, syntax)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ROLES = sorted(p for p in (REPO / "roles").iterdir() if (p / "tasks" / "main.yml").exists())
PLAYBOOKS = sorted((REPO / "playbooks").glob("*.yml"))
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def tool_env() -> dict[str, str]:
    """The environment Ansible's tools need: the venv's bin/ first on PATH (ansible-lint calls ansible)."""
    return {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", "ANSIBLE_NOCOLOR": "1", "NO_COLOR": "1"}
