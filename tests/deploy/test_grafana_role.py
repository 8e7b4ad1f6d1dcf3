"""The grafana role coexists with a Grafana it did not install.

- grafana.ini is merged, never overwritten: `ranklog.stack.ini_settings` (the collection's module the
  role uses, run here by Ansible on a temp copy of a packaged-style grafana.ini) sets the role's
  settings on their commented defaults or existing lines, keeps the operator's own settings and
  comments, and a second run changes nothing.
- The provisioned datasource takes uid, name and isDefault from role variables; not default unless asked.
"""

from __future__ import annotations

import json
import subprocess
import sys

import yaml

from tests.deploy.conftest import BIN, REPO, render_role_template

PACKAGED_INI = """##################### Grafana Configuration Example #####################
#################################### Server ####################################
[server]
# The ip address to bind to, empty will bind to all interfaces
;http_addr =

# The http port  to use
;http_port = 3000

# The public facing domain name used to access grafana from a browser
domain = grafana.corp.example
root_url = https://grafana.corp.example/

#################################### Security ####################################
[security]
# default admin user, created on startup
;admin_user = admin
;admin_password = admin
cookie_secure = false
secret_key = operators-own-secret

#################################### Auth ####################################
[auth.generic_oauth]
enabled = true
name = Corp SSO
"""


def _merge(tmp_path, env, settings: dict, extra: dict) -> subprocess.CompletedProcess:
    role = REPO / "roles" / "grafana"
    play = [{"name": "merge", "hosts": "localhost", "gather_facts": False,
             "vars_files": [str(role / "defaults" / "main.yml"), str(role / "vars" / "main.yml")],
             "tasks": [{"name": "merge grafana.ini", "ranklog.stack.ini_settings": {
                 "path": str(tmp_path / "grafana.ini"), "mode": "0640",
                 "settings": "{{ grafana_ranklog_ini_settings | combine(grafana_ini_settings, recursive=True) }}"}}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    (tmp_path / "vars.json").write_text(json.dumps({"grafana_ini_settings": settings, **extra}))
    return subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           "-e", f"ansible_python_interpreter={sys.executable}", "-e", f"@{tmp_path / 'vars.json'}",
                           str(tmp_path / "play.yml")], capture_output=True, text=True, env=env, timeout=120)


def test_grafana_ini_is_merged_not_overwritten(tmp_path, tool_env) -> None:
    (tmp_path / "grafana.ini").write_text(PACKAGED_INI)
    extra = {"grafana_admin_password": "s3cret-from-vault-123", "grafana_http_addr": "10.0.0.5"}
    first = _merge(tmp_path, tool_env, {"smtp": {"enabled": True, "host": "smtp.corp.example:25"}}, extra)
    assert first.returncode == 0 and "changed=1" in first.stdout, first.stdout[-3000:]
    text = (tmp_path / "grafana.ini").read_text()
    for kept in ("domain = grafana.corp.example", "root_url = https://grafana.corp.example/",
                 "secret_key = operators-own-secret", "[auth.generic_oauth]", "name = Corp SSO",
                 "# The http port  to use", "##################### Grafana Configuration Example"):
        assert kept in text, kept
    sections: dict[str, dict[str, str]] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith("["):
            current = line.strip("[]")
        elif "=" in line and not line.lstrip().startswith((";", "#")):
            key, value = (part.strip() for part in line.split("=", 1))
            assert key not in sections.setdefault(current, {}), f"{current}.{key} set twice"
            sections[current][key] = value
    assert sections["server"] == {"http_addr": "10.0.0.5", "http_port": "3000", "domain": "grafana.corp.example",
                                  "root_url": "https://grafana.corp.example/"}
    assert sections["security"]["cookie_secure"] == "true" and sections["security"]["admin_password"] == extra[
        "grafana_admin_password"]
    assert sections["auth.generic_oauth"] == {"enabled": "true", "name": "Corp SSO"}  # not the anonymous one
    assert sections["auth.anonymous"] == {"enabled": "false"}
    assert sections["smtp"] == {"enabled": "true", "host": "smtp.corp.example:25"}
    assert "s3cret-from-vault-123" not in first.stdout
    second = _merge(tmp_path, tool_env, {"smtp": {"enabled": True, "host": "smtp.corp.example:25"}}, extra)
    assert second.returncode == 0 and "changed=0" in second.stdout, second.stdout[-3000:]
    assert (tmp_path / "grafana.ini").read_text() == text


def test_datasource_identity_comes_from_role_variables(tmp_path, tool_env) -> None:
    generated = REPO / "dashboards" / "generated" / "grafana" / "provisioning" / "datasources" / "ranklog.yml"
    extra = {"item": str(generated), "grafana_datasource_url": "http://prom.corp.example:9090"}
    default = yaml.safe_load(render_role_template("grafana", "datasources.yml.j2", tmp_path / "default.yml", extra,
                                                  tool_env))["datasources"][0]
    assert (default["uid"], default["name"], default["isDefault"]) == ("ranklog-prometheus", "ranklog Prometheus", False)
    mine = {**extra, "grafana_datasource_uid": "obs-prom-2", "grafana_datasource_name": "Obs Prometheus",
            "grafana_datasource_is_default": True}
    chosen = yaml.safe_load(render_role_template("grafana", "datasources.yml.j2", tmp_path / "mine.yml", mine,
                                                 tool_env))["datasources"][0]
    assert (chosen["uid"], chosen["name"], chosen["isDefault"], chosen["url"]) == (
        "obs-prom-2", "Obs Prometheus", True, "http://prom.corp.example:9090")
