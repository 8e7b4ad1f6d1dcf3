"""The alertmanager role's config: valid for amtool, and its inhibit rules work in a live Alertmanager.

The role's own template is rendered by Ansible with the role's defaults (tests.deploy.conftest), then:
`amtool check-config` accepts it; `amtool config routes test` routes ranklog's alerts to the
receiver; a real `prometheus-alertmanager` on 127.0.0.1 is sent a root-cause alert (CUDA OOM) and
consequence alerts (NCCL timeout, silent rank, actor death) of the same training job and of another
job, and its API shows the same-job consequences inhibited by the OOM and the other job's not.
"""

from __future__ import annotations

import re
import subprocess
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import yaml

from dashboards.rules import alerts
from tests.dashboards.live_stack import wait_ready
from tests.deploy.conftest import REPO, render_role_template
from tests.helpers.net import free_port, wait_for_port
from tests.helpers.procs import spawn, stop

RECEIVERS = {"alertmanager_receivers": [{"name": "oncall", "webhook_configs": [{"url": "http://127.0.0.1:9/hook"}]}]}


@pytest.fixture(scope="module")
def config_file(tmp_path_factory, tool_env):
    workdir = tmp_path_factory.mktemp("alertmanager")
    render_role_template("alertmanager", "alertmanager.yml.j2", workdir / "alertmanager.yml", RECEIVERS, tool_env)
    return workdir / "alertmanager.yml"


def _ranklog_rules() -> list[dict]:
    defaults = yaml.safe_load((REPO / "roles" / "alertmanager" / "defaults" / "main.yml").read_text())
    return defaults["alertmanager_ranklog_inhibit_rules"]


def test_inhibit_rules_name_only_alerts_that_exist() -> None:
    """Every alert name the inhibit rules match is one dashboards/rules.py generates (kept in sync)."""
    known = {alert.name for alert in alerts()}
    named = set()
    for rule in _ranklog_rules():
        for matcher in rule["source_matchers"] + rule["target_matchers"]:
            value = re.fullmatch(r'alertname=~?"([^"]+)"', matcher).group(1)
            named |= set(value.split("|"))
    assert named and named <= known, sorted(named - known)


def test_amtool_check_config_accepts_the_rendered_file(config_file) -> None:
    proc = subprocess.run(["amtool", "check-config", str(config_file)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "inhibit rules: 2" in proc.stdout.lower() or "2 inhibit rules" in proc.stdout.lower(), proc.stdout


def test_amtool_routes_ranklog_alerts_to_the_receiver(config_file) -> None:
    proc = subprocess.run(["amtool", "config", "routes", "test", f"--config.file={config_file}",
                           "alertname=RanklogNcclTimeout", "training_job=train-a", "rank=3"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "oncall"


def _alert(name: str, job: str, rank: int, instance: str = "node1:9465") -> dict:
    now = datetime.now(UTC)
    return {"labels": {"alertname": name, "training_job": job, "rank": str(rank), "instance": instance,
                       "severity": "critical"},
            "startsAt": (now - timedelta(seconds=30)).isoformat(), "endsAt": (now + timedelta(minutes=10)).isoformat()}


def test_live_alertmanager_inhibits_consequences_of_the_same_training_job(config_file, tmp_path) -> None:
    port = free_port()
    proc = spawn(["prometheus-alertmanager", f"--config.file={config_file}", f"--storage.path={tmp_path / 'data'}",
                  f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
                 log_path=tmp_path / "alertmanager.log")
    try:
        wait_for_port(port, timeout=30, process=proc)
        url = f"http://127.0.0.1:{port}"
        wait_ready(f"{url}/-/ready", proc)
        sent = [_alert("RanklogCudaOutOfMemory", "train-a", 3),
                _alert("RanklogNcclTimeout", "train-a", 0), _alert("RanklogNcclTimeout", "train-a", 5),
                _alert("RanklogRankSilent", "train-a", 4), _alert("RanklogRayActorDied", "train-a", 1),
                _alert("RanklogNcclTimeout", "train-b", 0), _alert("RanklogRankSilent", "train-b", 2)]
        httpx.post(f"{url}/api/v2/alerts", json=sent, timeout=10).raise_for_status()

        def states() -> dict[tuple[str, str, str], dict]:
            got = httpx.get(f"{url}/api/v2/alerts", timeout=10).json()
            return {(a["labels"]["alertname"], a["labels"]["training_job"], a["labels"]["rank"]): a["status"]
                    for a in got}

        deadline = time.monotonic() + 20
        while True:
            current = states()
            inhibited = {key for key, status in current.items() if status["state"] == "suppressed"
                         and status["inhibitedBy"]}
            if (len(current) == len(sent) and len(inhibited) >= 4) or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert len(current) == len(sent), current
        assert inhibited == {("RanklogNcclTimeout", "train-a", "0"), ("RanklogNcclTimeout", "train-a", "5"),
                             ("RanklogRankSilent", "train-a", "4"), ("RanklogRayActorDied", "train-a", "1")}, current
        for key in (("RanklogCudaOutOfMemory", "train-a", "3"), ("RanklogNcclTimeout", "train-b", "0"),
                    ("RanklogRankSilent", "train-b", "2")):
            assert current[key]["state"] == "active" and not current[key]["inhibitedBy"], (key, current[key])
    finally:
        stop(proc)
