"""Per-node tokens from the vault (issue 20, item 4): the collection's node_token/node_tokens filters,
and the playbooks' wiring rendered by Ansible itself — the archive's templated tokens file binds each
node's token to its name (checked with the archive's own parser), each agent gets only its own."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ranklog.archive.auth import Caller, TokenStore
from tests.deploy.conftest import BIN, REPO

SECRET = "vault-secret-0123456789abcdef"


def _filters():
    spec = importlib.util.spec_from_file_location("node_tokens", REPO / "plugins" / "filter" / "node_tokens.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_node_tokens_are_distinct_stable_and_refuse_bad_input():
    filters = _filters()
    a, b = filters.node_token(SECRET, "node-a"), filters.node_token(SECRET, "node-b")
    assert a != b and len(a) == 64 and a == filters.node_token(SECRET, "node-a")
    assert filters.node_token(SECRET + "x", "node-a") != a  # rotating the secret rotates every token
    assert filters.node_tokens(["node-a"], SECRET, {"node-a": ["node-a", "node-a.*"]}) == [
        {"identity": "node-a", "token": a, "hosts": ["node-a", "node-a.*"]}]
    from ansible.errors import AnsibleFilterError

    for bad in (lambda: filters.node_token("short", "node-a"), lambda: filters.node_token(SECRET, "node a"),
                lambda: filters.node_tokens("node-a", SECRET)):
        with pytest.raises(AnsibleFilterError):
            bad()


def _rollout(tmp_path: Path, tool_env: dict[str, str], mode: str) -> tuple[str, dict[str, str]]:
    """The archive's tokens file and each node's agent token, as the playbooks' group_vars wire them."""
    inventory = tmp_path / "inventory" / "hosts.yml"
    inventory.parent.mkdir()
    inventory.write_text(yaml.safe_dump({"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "ranklog_token_mode": mode, "ranklog_node_token_hosts": {"node-b": ["node-b", "node-b.*"]}},
        "children": {"training_nodes": {"hosts": {"node-a": {}, "node-b": {}}},
                     "ranklog_archive": {"hosts": {"archive-a": {"ansible_host": "127.0.0.2"}}}}}}))
    out = tmp_path / "out"
    out.mkdir()
    role = REPO / "roles" / "ranklog_archive"
    play = [{"name": "wiring", "hosts": "all", "gather_facts": False,
             # the role's defaults first: the playbooks' group_vars beat them, as on a real run
             "vars_files": [str(role / "defaults" / "main.yml"), str(REPO / "playbooks" / "group_vars" / "all.yml")],
             "tasks": [
                 {"name": "agent token", "ansible.builtin.copy": {"content": "{{ ranklog_agent_token }}\n",
                                                                  "dest": f"{out}/{{{{ inventory_hostname }}}}.token",
                                                                  "mode": "0600"},
                  "when": "inventory_hostname in groups['training_nodes']"},
                 {"name": "archive tokens", "ansible.builtin.template": {
                     "src": str(role / "templates" / "archive.tokens.j2"), "dest": f"{out}/archive.tokens",
                     "mode": "0600"}, "when": "inventory_hostname in groups['ranklog_archive']"}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), str(tmp_path / "play.yml")],
                          capture_output=True, text=True, env=tool_env, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    tokens = {node: (out / f"{node}.token").read_text().strip() for node in ("node-a", "node-b")}
    return (out / "archive.tokens").read_text(), tokens


def test_playbooks_issue_one_bound_token_per_node(tmp_path, tool_env):
    archive_file, agent_tokens = _rollout(tmp_path, tool_env, "per_node")
    assert agent_tokens["node-a"] != agent_tokens["node-b"]
    path = tmp_path / "check.tokens"
    path.write_text(archive_file)
    store = TokenStore(str(path))
    assert store.identify(f"Bearer {agent_tokens['node-a']}") == Caller("node-a", ("node-a",))
    assert store.identify(f"Bearer {agent_tokens['node-b']}") == Caller("node-b", ("node-b", "node-b.*"))
    readers = (tmp_path / "inventory" / "credentials" / "ranklog-archive-token").read_text().split()[0]
    assert store.identify(f"Bearer {readers}") == Caller("ranklog-readers", ("ranklog-readers",))
    secret = tmp_path / "inventory" / "credentials" / "ranklog-node-token-secret"
    assert len(secret.read_text().split()[0]) == 48  # generated once, reused: the tokens are stable
    again = tmp_path / "again"
    again.mkdir()
    assert _rollout(again, tool_env, "per_node")[1] != agent_tokens  # another inventory, another secret
    assert "ranklog-readers" in archive_file and SECRET not in archive_file


def test_shared_mode_gives_every_node_the_one_token(tmp_path, tool_env):
    archive_file, agent_tokens = _rollout(tmp_path, tool_env, "shared")
    assert agent_tokens["node-a"] == agent_tokens["node-b"]
    path = tmp_path / "check.tokens"
    path.write_text(archive_file)
    assert TokenStore(str(path)).identify(f"Bearer {agent_tokens['node-a']}") == Caller()
    assert json.dumps(archive_file).count(agent_tokens["node-a"]) == 1
