"""Fixtures every test area shares: loopback ports, token files, a scratch directory."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from tests.helpers.net import free_port


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    """A token file with one random token (mode 0600), as the agent and archive read it."""
    path = tmp_path / "tokens"
    path.write_text(secrets.token_hex(16) + "\n")
    path.chmod(0o600)
    return path
