"""The agent role's ``ranklog_agent_parse_workers``: ``auto`` leaves the agent's own default (the CPUs
its unit allows), a number is written to agent.yaml, and the written file passes the agent's loader."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from tests.deploy.conftest import render_role_template

BASE = {"inventory_hostname": "node1", "ranklog_agent_archive_urls": ["https://archive:8470"]}


@pytest.mark.parametrize(("value", "expected"), [("auto", None), (3, 3), ("1", 1)])
def test_parse_workers_reach_agent_yaml(value, expected, tmp_path, tool_env) -> None:
    dest = tmp_path / "agent.yaml"
    text = render_role_template("ranklog_agent", "agent.yaml.j2", dest, {**BASE, "ranklog_agent_parse_workers": value},
                                tool_env)
    assert yaml.safe_load(text).get("parse_workers") == expected
    (tmp_path / "token").write_text("t" * 20 + "\n")
    config = yaml.safe_load(text) | {"token_file": str(tmp_path / "token"), "state_dir": str(tmp_path)}
    dest.write_text(yaml.safe_dump(config))
    check = subprocess.run([sys.executable, "-m", "ranklog", "check-config", "--kind", "agent", "--ignore-env", str(dest)],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stderr


def test_zero_parse_workers_fail_the_check_naming_the_key(tmp_path) -> None:
    dest = tmp_path / "agent.yaml"
    (tmp_path / "token").write_text("t" * 20 + "\n")
    dest.write_text(yaml.safe_dump({"archive": ["https://a:1"], "token_file": str(tmp_path / "token"),
                                    "preset": ["ranklog"], "parse_workers": 0}))
    check = subprocess.run([sys.executable, "-m", "ranklog", "check-config", "--kind", "agent", "--ignore-env", str(dest)],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 2 and "parse_workers" in check.stderr and "Traceback" not in check.stderr
