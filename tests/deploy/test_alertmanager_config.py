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
from pathlib import Path

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
    assert "inhibit rules: 3" in proc.stdout.lower() or "3 inhibit rules" in proc.stdout.lower(), proc.stdout


def test_amtool_routes_ranklog_alerts_to_the_receiver(config_file) -> None:
    proc = subprocess.run(["amtool", "config", "routes", "test", f"--config.file={config_file}",
                           "alertname=RanklogNcclTimeout", "training_job=train-a", "rank=3"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "oncall"


VERDICT = {**RECEIVERS, "alertmanager_ranklog_verdict_url": "http://archive1:8470/v1/alerts",
           "alertmanager_ranklog_verdict_token": "readers-token-0123456789"}


@pytest.fixture(scope="module")
def verdict_configs(tmp_path_factory, tool_env) -> dict[str, Path]:
    """The role's file with the verdict route: by default (continue), as the only page, and beside a
    route of the operator's own."""
    variants = {
        "default": VERDICT,
        "verdict-only": {**VERDICT, "alertmanager_ranklog_verdict_continue": False},
        "own-routes": {**VERDICT, "alertmanager_receivers": RECEIVERS["alertmanager_receivers"] + [
            {"name": "infra", "webhook_configs": [{"url": "http://127.0.0.1:9/infra"}]}],
            "alertmanager_route": {"receiver": "oncall", "group_by": ["alertname"], "routes": [
                {"receiver": "infra", "matchers": ['team="infra"']}]}},
    }
    out = {}
    for name, extra in variants.items():
        workdir = tmp_path_factory.mktemp(f"alertmanager-{name}")
        render_role_template("alertmanager", "alertmanager.yml.j2", workdir / "alertmanager.yml", extra, tool_env)
        out[name] = workdir / "alertmanager.yml"
    return out


def test_the_verdict_route_takes_every_root_cause_and_consequence() -> None:
    """The verdict and context alerts = the inhibit rules' sources ∪ targets (kept in sync), and every
    alert rule of the training component with a signature or a rank is among them."""
    defaults = yaml.safe_load((REPO / "roles" / "alertmanager" / "defaults" / "main.yml").read_text())
    named = set()
    for rule in defaults["alertmanager_ranklog_inhibit_rules"]:
        for matcher in rule["source_matchers"] + rule["target_matchers"]:
            named |= set(re.fullmatch(r'alertname=~?"([^"]+)"', matcher).group(1).split("|"))
    verdict, context = (set(defaults[f"alertmanager_ranklog_verdict_{k}"]) for k in ("alerts", "context_alerts"))
    assert verdict | context == named and not verdict & context
    from dashboards.rules import alerts

    training = {a.name for a in alerts() if a.component == "training"} - {"RanklogErrorBurst"}
    assert training <= verdict, training - verdict


def test_the_verdict_receiver_carries_the_token_and_resolved_notifications(verdict_configs) -> None:
    config = yaml.safe_load(verdict_configs["default"].read_text())
    (receiver,) = [r for r in config["receivers"] if r["name"] == "ranklog-verdict"]
    (hook,) = receiver["webhook_configs"]
    assert hook == {"url": "http://archive1:8470/v1/alerts", "send_resolved": True, "http_config": {
        "authorization": {"type": "Bearer", "credentials": "readers-token-0123456789"}}}
    context, route = config["route"]["routes"][:2]
    assert (route["receiver"], route["group_by"], route["group_wait"], route["continue"]) == (
        "ranklog-verdict", ["training_job"], "0s", True)
    assert (context["receiver"], context["matchers"], context["group_by"], context["continue"]) == (
        "ranklog-verdict", ['alertname=~"RanklogAgentDown"'], ["instance"], True)
    proc = subprocess.run(["amtool", "check-config", str(verdict_configs["default"])], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and "2 receivers" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize("variant, labels, receivers", [
    ("default", ["alertname=RanklogCudaOutOfMemory", "training_job=j", "rank=3"], "ranklog-verdict,oncall"),
    ("default", ["alertname=RanklogRankFailed", "training_job=j", "rank=3"], "ranklog-verdict,oncall"),
    ("default", ["alertname=RanklogFailureConsequence", "training_job=j", "rank=0"], "ranklog-verdict,oncall"),
    ("default", ["alertname=RanklogRankSilent", "training_job=j", "rank=2"], "ranklog-verdict,oncall"),
    ("default", ["alertname=RanklogErrorBurst", "training_job=j", "rank=3"], "oncall"),
    ("default", ["alertname=RanklogDiskFull", "training_job=j", "rank=0"], "ranklog-verdict,oncall"),
    ("default", ["alertname=RanklogStraggler", "training_job=j", "rank=2"], "ranklog-verdict,oncall"),
    ("default", ["alertname=RanklogAgentDown", "instance=node1:9465", "node=node1"], "ranklog-verdict,oncall"),
    ("default", ["alertname=RanklogArchiveDown", "instance=archive1:8470"], "oncall"),
    ("verdict-only", ["alertname=RanklogCudaOutOfMemory", "training_job=j", "rank=3"], "ranklog-verdict"),
    ("verdict-only", ["alertname=RanklogAgentDown", "instance=node1:9465"], "ranklog-verdict,oncall"),
    ("own-routes", ["alertname=RanklogAgentDown", "instance=node1:9465", "team=infra"], "ranklog-verdict,infra"),
    ("own-routes", ["alertname=RanklogNcclTimeout", "training_job=j", "team=infra"], "ranklog-verdict,infra"),
    ("own-routes", ["alertname=RanklogNcclTimeout", "training_job=j"], "ranklog-verdict,oncall"),
    ("own-routes", ["alertname=RanklogArchiveDown", "team=infra"], "infra"),
])
def test_amtool_routes_the_verdict_alerts(verdict_configs, variant, labels, receivers) -> None:
    """`amtool config routes test --verify.receivers`: the verdict comes in addition to (or instead
    of) the page, and every other alert is routed as before."""
    proc = subprocess.run(["amtool", "config", "routes", "test", f"--config.file={verdict_configs[variant]}",
                           f"--verify.receivers={receivers}", *labels], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == receivers


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
