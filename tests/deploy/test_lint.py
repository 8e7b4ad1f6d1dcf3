"""The roles and playbooks pass yamllint and ansible-lint's production profile."""

from __future__ import annotations

import subprocess

import pytest

from tests.deploy.conftest import BIN, REPO


def test_yamllint_is_clean(tool_env) -> None:
    proc = subprocess.run([str(BIN / "yamllint"), "-s", "-f", "parsable", "galaxy.yml", "meta", "roles", "playbooks"], cwd=REPO,
                          capture_output=True, text=True, env=tool_env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_ansible_lint_production_profile(tool_env) -> None:
    proc = subprocess.run([str(BIN / "ansible-lint"), "--profile", "production", "--nocolor", "-q", "roles", "playbooks"],
                          cwd=REPO, capture_output=True, text=True, env=tool_env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
