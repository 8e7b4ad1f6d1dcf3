"""Shared paths of the deploy tests (no containers: lint, specs, syntax, the collection build).

The repository root is the Ansible collection `ranklog.stack` (galaxy.yml): roles/ and playbooks/
refer to each other by FQCN, so the tools that read the source tree see it through a
`ansible_collections/ranklog/stack` link made here.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLES = sorted(p for p in (REPO / "roles").iterdir() if (p / "tasks" / "main.yml").exists())
PLAYBOOKS = sorted((REPO / "playbooks").glob("*.yml"))
BIN = Path(sys.executable).parent
GALAXY = yaml.safe_load((REPO / "galaxy.yml").read_text())
COLLECTION = f"{GALAXY['namespace']}.{GALAXY['name']}"


def variable_prefix(role: Path) -> str:
    """The prefix of the role's variables and phase tags: its name (ansible-lint's var-naming[no-role-prefix])."""
    return role.name


def link_collection(root: Path) -> Path:
    """`root` made a collections path whose ranklog.stack is this working tree (a symlink, nothing copied)."""
    link = root / "ansible_collections" / GALAXY["namespace"] / GALAXY["name"]
    link.parent.mkdir(parents=True)
    link.symlink_to(REPO, target_is_directory=True)
    return root


def ansible_env(collections: Path) -> dict[str, str]:
    """The environment Ansible's tools need: the venv's bin/ first on PATH (ansible-lint calls ansible)."""
    return {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", "ANSIBLE_NOCOLOR": "1", "NO_COLOR": "1",
            "ANSIBLE_COLLECTIONS_PATH": str(collections)}


@pytest.fixture(scope="session")
def source_collections(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return link_collection(tmp_path_factory.mktemp("collections"))


@pytest.fixture(scope="session")
def tool_env(source_collections: Path) -> dict[str, str]:
    return ansible_env(source_collections)


def render_role_template(role: str, template: str, dest: Path, extra_vars: dict, env: dict[str, str]) -> str:
    """`roles/<role>/templates/<template>` rendered by Ansible itself with the role's defaults + extra_vars.

    A one-task play on localhost (`ansible.builtin.template`), so the test sees exactly what the
    role would write on a host (with inventory groups empty).
    """
    import json
    import subprocess

    role_dir = REPO / "roles" / role
    play = [{"name": "render", "hosts": "localhost", "gather_facts": False,
             "vars_files": [str(p) for p in (role_dir / "defaults" / "main.yml", role_dir / "vars" / "main.yml")
                            if p.exists()],
             "tasks": [{"name": "template", "ansible.builtin.template": {
                 "src": str(role_dir / "templates" / template), "dest": str(dest), "mode": "0600"}}]}]
    workdir = dest.parent
    (workdir / "render.yml").write_text(yaml.safe_dump(play))
    (workdir / "render-vars.json").write_text(json.dumps(extra_vars))
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           "-e", f"ansible_python_interpreter={sys.executable}", "-e", f"@{workdir / 'render-vars.json'}",
                           str(workdir / "render.yml")], capture_output=True, text=True, env=env, timeout=120)
    if proc.returncode != 0:
        raise AssertionError(f"rendering {role}/{template} failed:\n{proc.stdout[-3000:]}{proc.stderr[-2000:]}")
    return dest.read_text()
