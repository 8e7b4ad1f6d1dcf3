"""The config checker the roles use in `validate:` accepts good files and names the bad key."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.deploy.conftest import REPO

CHECKER = REPO / "roles" / "ranklog_install" / "files" / "ranklog_check_config.py"
GOOD = {
    "agent": "archive: [http://10.0.0.5:8470]\ntoken_file: /etc/ranklog/agent.token\npreset: [ranklog]\n"
             "sources: [{glob: '/var/log/app/*.log', format: text}]\nmetrics_listen: 10.0.0.11:9465\n",
    "archive": "root: /var/lib/ranklog-archive\nlisten: 10.0.0.5:8470\ntoken_file: /etc/ranklog/archive.tokens\n"
               "retention: {default: 30d, levels: {DEBUG: 7d}}\n",
}


def _check(component: str, path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECKER), component, str(path)], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("component", sorted(GOOD))
def test_good_config_passes(component, tmp_path) -> None:
    path = tmp_path / f"{component}.yaml"
    path.write_text(GOOD[component])
    proc = _check(component, path)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("component", sorted(GOOD))
def test_unknown_key_fails_naming_it(component, tmp_path) -> None:
    path = tmp_path / f"{component}.yaml"
    path.write_text(GOOD[component] + "flush_intervall: 3s\n")
    proc = _check(component, path)
    assert proc.returncode == 1
    assert "flush_intervall" in proc.stderr


def test_unknown_component_is_a_usage_error(tmp_path) -> None:
    proc = _check("grafana", tmp_path / "x.yaml")
    assert proc.returncode == 2 and "usage" in proc.stderr


def test_tokens_file_check_names_the_line_never_the_token(tmp_path) -> None:
    """The archive role validates its templated tokens file with the archive's own parser."""
    path = tmp_path / "archive.tokens"
    path.write_text("# managed\nshared-0123456789abcdef\nnode1-token-0123456789 node1 node1 node1.example.com\n")
    assert _check("tokens", path).returncode == 0
    path.write_text("node1-token-0123456789 node1\nnode1-token-0123456789 node2\n")
    proc = _check("tokens", path)
    assert proc.returncode == 1 and "archive.tokens:2" in proc.stderr
    assert "node1-token-0123456789" not in proc.stderr


def test_a_source_the_agent_would_skip_fails_the_play(tmp_path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text(GOOD["agent"].replace("format: text", "format: verl-consol"))
    proc = _check("agent", path)
    assert proc.returncode == 1 and "sources[0].format: unknown format 'verl-consol'" in proc.stderr
