"""The archive role's verdict settings: receivers and the report URL in archive.yaml, secrets in files.

The role's own template is rendered by Ansible (tests.deploy.conftest) with three receivers; the
written archive.yaml names files for the Slack URL and the tokens and holds none of the secrets,
and the archive's own config checker (the role's ``validate:``) accepts it once those files exist.
"""

from __future__ import annotations

import subprocess
import sys

import yaml

from tests.deploy.conftest import REPO, render_role_template

CHECKER = REPO / "roles" / "ranklog_install" / "files" / "ranklog_check_config.py"
SLACK_URL = "https://hooks.slack.com/services/T000/B000/secret-path-0123456789"
GRAFANA_TOKEN = "glsa_grafana-token-0123456789"
VARS = {
    "ranklog_archive_tokens": ["shared-token-0123456789"],
    "ranklog_archive_report_url": "https://archive.example:8470",
    "ranklog_archive_verdict_receivers": [
        {"name": "pager", "type": "webhook", "url": "https://pager.example/ranklog"},
        {"name": "slack", "type": "slack", "url": SLACK_URL},
        {"name": "grafana", "type": "grafana", "url": "https://grafana.example", "token": GRAFANA_TOKEN,
         "dashboard_uid": "ranklog-training"},
    ],
}


def test_archive_yaml_names_secret_files_and_validates(tmp_path, tool_env) -> None:
    text = render_role_template("ranklog_archive", "archive.yaml.j2", tmp_path / "archive.yaml", VARS, tool_env)
    assert SLACK_URL not in text and GRAFANA_TOKEN not in text
    verdict = yaml.safe_load(text)["verdict"]
    assert verdict["report_url"] == "https://archive.example:8470"
    assert verdict["receivers"] == [
        {"name": "pager", "type": "webhook", "url": "https://pager.example/ranklog"},
        {"name": "slack", "type": "slack", "url_file": "/etc/ranklog/verdict-slack.url"},
        {"name": "grafana", "type": "grafana", "url": "https://grafana.example",
         "token_file": "/etc/ranklog/verdict-grafana.token", "dashboard_uid": "ranklog-training",
         "tags": ["ranklog", "verdict"]},
    ]
    # What the role's copy tasks write, where the checker can read it here.
    (tmp_path / "verdict-slack.url").write_text(SLACK_URL + "\n")
    (tmp_path / "verdict-grafana.token").write_text(GRAFANA_TOKEN + "\n")
    local = tmp_path / "local.yaml"
    local.write_text(text.replace("/etc/ranklog/verdict-", f"{tmp_path}/verdict-"))
    proc = subprocess.run([sys.executable, str(CHECKER), "archive", str(local)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    # A receiver whose secret file is missing fails the check, naming the key and never the secret.
    (tmp_path / "verdict-slack.url").unlink()
    proc = subprocess.run([sys.executable, str(CHECKER), "archive", str(local)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1 and "verdict.receivers[1]: url_file" in proc.stderr, proc.stderr


def test_without_receivers_archive_yaml_has_no_verdict_section(tmp_path, tool_env) -> None:
    extra = {"ranklog_archive_tokens": ["shared-token-0123456789"]}
    text = render_role_template("ranklog_archive", "archive.yaml.j2", tmp_path / "archive.yaml", extra, tool_env)
    assert "verdict" not in yaml.safe_load(text)
