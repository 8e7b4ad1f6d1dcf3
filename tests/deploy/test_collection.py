"""The repository builds as the Ansible collection ranklog.stack, and the installed tarball works.

`ansible-galaxy collection build` then `install` from the tarball (offline), and on the installed
copy: the tarball holds the roles, playbooks and generated rules/dashboards and nothing of the Python
package or the tests; every playbook is addressable by FQCN and passes --syntax-check; the roles are
listed under their FQCNs.
"""

from __future__ import annotations

import subprocess
import tarfile

import pytest

from tests.deploy.conftest import BIN, PLAYBOOKS, REPO, ROLES
from tests.helpers import collection

# The rule generator the prometheus role runs on the controller for prometheus_ranklog_alert_thresholds.
RULE_RENDERER = {"dashboards/__init__.py", "dashboards/rules.py", "dashboards/yaml_output.py"}


@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory):
    return collection.build(tmp_path_factory.mktemp("collection-build"))


@pytest.fixture(scope="module")
def installed(tarball, tmp_path_factory: pytest.TempPathFactory):
    return collection.install(tarball, tmp_path_factory.mktemp("collections"))


@pytest.fixture(scope="module")
def installed_env(installed, tool_env) -> dict[str, str]:
    return {**tool_env, "ANSIBLE_COLLECTIONS_PATH": str(installed)}


def test_tarball_holds_the_ansible_content_and_nothing_else(tarball) -> None:
    with tarfile.open(tarball) as tar:
        names = set(tar.getnames())
    for role in ROLES:
        assert f"roles/{role.name}/tasks/main.yml" in names
        assert f"roles/{role.name}/meta/argument_specs.yml" in names
    for playbook in PLAYBOOKS:
        assert f"playbooks/{playbook.name}" in names
    for generated in (REPO / "dashboards" / "generated").rglob("*"):
        if generated.is_file():
            assert str(generated.relative_to(REPO)) in names
    assert {"MANIFEST.json", "meta/runtime.yml", "plugins/modules/ini_settings.py"} | RULE_RENDERER <= names
    leaked = sorted(n for n in names if n.split("/")[0] in {"exporters", "tests", "images", ".venv", ".cache",
                                                            ".ansible", ".git", "dist"}
                    or (n.endswith(".py") and not n.startswith(("roles/", "plugins/")) and n not in RULE_RENDERER))
    assert not leaked, leaked


def test_installed_roles_are_listed_under_their_fqcn(installed, installed_env) -> None:
    root = collection.installed_root(installed)
    assert sorted(p.name for p in (root / "roles").iterdir()) == sorted(r.name for r in ROLES)
    proc = subprocess.run([str(BIN / "ansible-galaxy"), "collection", "list", "-p", str(installed),
                           f"{collection.NAMESPACE}.{collection.NAME}"],
                          capture_output=True, text=True, env=installed_env, timeout=120)
    assert proc.returncode == 0 and f"{collection.NAMESPACE}.{collection.NAME}" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize("playbook", PLAYBOOKS, ids=lambda p: p.name)
def test_installed_playbook_by_fqcn_passes_syntax_check(playbook, installed_env, tmp_path) -> None:
    fqcn = f"{collection.NAMESPACE}.{collection.NAME}.{playbook.stem}"
    # Run from an empty directory: nothing of the source tree may be what makes it resolve.
    proc = subprocess.run([str(BIN / "ansible-playbook"), "--syntax-check", "-i",
                           str(REPO / "playbooks" / "inventory" / "example" / "hosts.yml"), fqcn],
                          cwd=tmp_path, capture_output=True, text=True, env=installed_env, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_installed_playbooks_bring_their_group_vars(installed_env, tmp_path) -> None:
    """The wiring in playbooks/group_vars/all.yml applies to FQCN playbooks run from the installed copy.

    Only the preflight asserts run (`--tags always`, local connection): they fail unless the archive
    URLs were derived from the inventory groups by the collection's group_vars.
    """
    wheels = tmp_path / "wheels"  # the preflight only asks that the wheel to roll out is there
    wheels.mkdir()
    (wheels / "ranklog-0.1.0-py3-none-any.whl").touch()
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(
        "all:\n  vars:\n    ansible_connection: local\n    ansible_python_interpreter: " + str(BIN / "python") + "\n"
        "    ranklog_token: 0123456789abcdef0123\n    ranklog_wheel_dir: " + str(wheels) + "\n"
        "  children:\n    training_nodes: {hosts: {node-a: {ansible_host: 127.0.0.1}}}\n"
        "    ranklog_archive: {hosts: {archive-a: {ansible_host: 127.0.0.2}}}\n")
    fqcn = f"{collection.NAMESPACE}.{collection.NAME}.training_nodes"
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), fqcn, "--tags", "always"],
                          cwd=tmp_path, capture_output=True, text=True, env=installed_env, timeout=120)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "failed=0" in proc.stdout
