"""Every playbook passes `ansible-playbook --syntax-check` against the example inventory."""

from __future__ import annotations

import subprocess

import pytest

from tests.deploy.conftest import BIN, PLAYBOOKS, REPO


@pytest.mark.parametrize("playbook", PLAYBOOKS, ids=lambda p: p.name)
def test_syntax_check(playbook, tool_env) -> None:
    proc = subprocess.run([str(BIN / "ansible-playbook"), "--syntax-check", "-i",
                           str(REPO / "playbooks" / "inventory" / "example" / "hosts.yml"), str(playbook)],
                          cwd=REPO, capture_output=True, text=True, env=tool_env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_example_inventory_has_the_three_groups(tool_env) -> None:
    proc = subprocess.run([str(BIN / "ansible-inventory"), "-i",
                           str(REPO / "playbooks" / "inventory" / "example" / "hosts.yml"), "--graph"],
                          capture_output=True, text=True, env=tool_env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for group in ("@training_nodes", "@ranklog_archive", "@monitoring"):
        assert group in proc.stdout
