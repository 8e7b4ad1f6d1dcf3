"""Every role's defaults/main.yml and meta/argument_specs.yml agree key for key and value for value."""

from __future__ import annotations

import pytest
import yaml

from tests.deploy.conftest import ROLES, variable_prefix


def _load(path):
    return yaml.safe_load(path.read_text()) or {}


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_defaults_match_argument_specs(role) -> None:
    defaults = _load(role / "defaults" / "main.yml")
    options = _load(role / "meta" / "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert sorted(defaults) == sorted(options), "keys differ: " + str(set(defaults) ^ set(options))
    for key, value in defaults.items():
        assert options[key].get("default") == value, f"{key}: default {value!r} != spec {options[key].get('default')!r}"
        assert options[key].get("description"), f"{key}: no description"


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_variables_carry_the_role_prefix(role) -> None:
    defaults = _load(role / "defaults" / "main.yml")
    assert all(key.startswith(variable_prefix(role) + "_") for key in defaults), sorted(defaults)


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_role_has_preflight_first_readme_and_tagged_phases(role) -> None:
    tasks = _load(role / "tasks" / "main.yml")
    assert tasks[0]["ansible.builtin.import_tasks"] == "preflight.yml" and tasks[0]["tags"] == ["always"]
    preflight = _load(role / "tasks" / "preflight.yml")
    assert preflight and all(set(t) & {"ansible.builtin.assert"} for t in preflight), "preflight must only assert"
    phase_tags = {tag for task in tasks[1:] for tag in task.get("tags", [])}
    prefix = variable_prefix(role)
    # Role-prefixed tags: `--skip-tags ranklog_agent_install` skips one role's phase, not every role's.
    assert phase_tags <= {f"{prefix}_{phase}" for phase in ("install", "configure", "run")}, phase_tags
    assert f"{prefix}_install" in phase_tags
    assert (role / "README.md").read_text().strip()
