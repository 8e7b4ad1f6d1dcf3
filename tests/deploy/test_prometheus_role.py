"""The prometheus role on this machine, touching only temporary directories (local connection).

- `prometheus_install_method: none`: the role drops ranklog's rule file and scrape configs into
  the drop-in directories of a Prometheus it did not install, writes no prometheus.yml and no unit,
  and a second run changes nothing. A prometheus.yml that includes them (rule_files, and the
  scrape configs inlined: Debian's promtool 2.42 predates scrape_config_files) passes
  `promtool check config`; the deployed rules link the runbook at prometheus_ranklog_runbook_url.
- Tarball method, download step: the release file for the host's architecture (x86_64 → amd64,
  aarch64 → arm64) is fetched from a release URL (a loopback server standing in for the upstream
  release) and checked against the release's sha256sums.txt; a tampered tarball fails the play.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from dashboards.rules import RULES_FILE, RUNBOOK_URL
from tests.deploy.conftest import BIN, REPO
from tests.helpers.net import free_port

RUNBOOK = "https://wiki.example.internal/ml/ranklog-runbook.md"


def _play(tmp: Path, tasks: list[dict], extra_vars: dict, env: dict[str, str]) -> subprocess.CompletedProcess:
    inventory = {"all": {"vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
                         "children": {
                             "monitoring": {"hosts": {"localhost": None}},
                             "training_nodes": {"hosts": {"gpu-a": {"ansible_host": "10.1.0.11",
                                                                    "ranklog_agent_metrics_listen": "10.1.0.11:9465"},
                                                          "gpu-b": {"ansible_host": "10.1.0.12"}}},
                             "ranklog_archive": {"hosts": {"obs-a": {"ansible_host": "10.1.0.2"}}}}}}
    (tmp / "hosts.yml").write_text(yaml.safe_dump(inventory))
    play = [{"name": "prometheus role", "hosts": "localhost", "gather_facts": False, "tasks": tasks}]
    (tmp / "play.yml").write_text(yaml.safe_dump(play))
    (tmp / "vars.json").write_text(json.dumps(extra_vars))
    return subprocess.run([str(BIN / "ansible-playbook"), "-i", str(tmp / "hosts.yml"), "-e", f"@{tmp / 'vars.json'}",
                           str(tmp / "play.yml")], capture_output=True, text=True, env=env, timeout=300, cwd=tmp)


def _changed(proc: subprocess.CompletedProcess) -> int:
    return int(proc.stdout.rsplit("changed=", 1)[1].split()[0])


def test_mode_none_drops_rules_and_scrape_configs_into_an_existing_prometheus(tmp_path, tool_env) -> None:
    rules_dir, scrape_dir = tmp_path / "rules.d", tmp_path / "scrape.d"
    (tmp_path / "rules.d").mkdir()
    (rules_dir / "operators-own.yml").write_text("groups: []\n")  # must survive: not ranklog's to remove
    extra = {"prometheus_install_method": "none", "prometheus_rules_dir": str(rules_dir),
             "prometheus_scrape_config_dir": str(scrape_dir), "prometheus_rule_files": [str(RULES_FILE)],
             "prometheus_ranklog_runbook_url": RUNBOOK}
    tasks = [{"name": "role", "ansible.builtin.import_role": {"name": "ranklog.stack.prometheus"}}]
    first = _play(tmp_path, tasks, extra, tool_env)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    for task in ("Install the Prometheus package", "Write prometheus.yml", "Install the Prometheus unit",
                 "Start and enable Prometheus"):
        after = first.stdout.split(f"ranklog.stack.prometheus : {task}]", 1)[1].lstrip("* \n")
        assert after.startswith("skipping: [localhost]"), f"{task} ran in mode none: {after[:200]}"
    second = _play(tmp_path, tasks, extra, tool_env)
    assert second.returncode == 0 and _changed(second) == 0, second.stdout[-4000:]

    assert sorted(p.name for p in rules_dir.iterdir()) == ["operators-own.yml", RULES_FILE.name]
    deployed = (rules_dir / RULES_FILE.name).read_text()
    assert RUNBOOK_URL not in deployed
    urls = [r["annotations"]["runbook_url"] for g in yaml.safe_load(deployed)["groups"] for r in g["rules"] if "alert" in r]
    assert urls and all(u.startswith(f"{RUNBOOK}#") for u in urls), urls
    scrape = yaml.safe_load((scrape_dir / "ranklog.yml").read_text())["scrape_configs"]
    jobs = {job["job_name"]: job for job in scrape}
    assert set(jobs) == {"ranklog-agent", "ranklog-archive"}
    assert [t["targets"][0] for t in jobs["ranklog-agent"]["static_configs"]] == ["10.1.0.11:9465", "10.1.0.12:9465"]
    assert not any(job.get("honor_labels") for job in scrape), "job must stay the operator's scrape job"

    # The operator's prometheus.yml: their own job plus ranklog's drop-ins.
    config = {"global": {"scrape_interval": "15s"}, "rule_files": [f"{rules_dir}/*.yml"],
              "scrape_configs": [{"job_name": "node", "static_configs": [{"targets": ["10.1.0.11:9100"]}]}, *scrape]}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    check = subprocess.run(["promtool", "check", "config", str(tmp_path / "prometheus.yml")],
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"{rules_dir}/{RULES_FILE.name}" in check.stdout + check.stderr


def test_generated_runbook_base_is_the_one_the_role_replaces() -> None:
    role_vars = yaml.safe_load((REPO / "roles" / "prometheus" / "vars" / "main.yml").read_text())
    assert role_vars["prometheus_generated_runbook_url"] == RUNBOOK_URL
    assert RUNBOOK_URL.startswith("https://") and f"runbook_url: {RUNBOOK_URL}#" in RULES_FILE.read_text()


@pytest.fixture(scope="module")
def release_server(tmp_path_factory):
    """A loopback stand-in for the upstream release: per-architecture tarballs and sha256sums.txt."""
    root = tmp_path_factory.mktemp("release")
    release = root / "v2.53.2"
    release.mkdir()
    sums = []
    for arch in ("amd64", "arm64"):
        name = f"prometheus-2.53.2.linux-{arch}.tar.gz"
        (release / name).write_bytes(f"release for {arch}\n".encode() * 100)
        sums.append(f"{hashlib.sha256((release / name).read_bytes()).hexdigest()}  {name}")
    (release / "sha256sums.txt").write_text("\n".join(sums) + "\n")
    port = free_port()
    server = ThreadingHTTPServer(("127.0.0.1", port), partial(SimpleHTTPRequestHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield release, f"http://127.0.0.1:{port}/v2.53.2"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(("architecture", "goarch"), [("x86_64", "amd64"), ("aarch64", "arm64")])
def test_tarball_download_picks_the_architecture_and_checks_the_release_sums(
        release_server, tmp_path, tool_env, architecture, goarch) -> None:
    release, url = release_server
    downloads = tmp_path / "cache"
    downloads.mkdir()
    tasks = [{"name": "download", "ansible.builtin.include_role": {"name": "ranklog.stack.prometheus",
                                                                   "tasks_from": "download"}}]
    extra = {"prometheus_install_method": "tarball", "prometheus_release_url": url,
             "prometheus_download_dir": str(downloads), "ansible_architecture": architecture}
    proc = _play(tmp_path, tasks, extra, tool_env)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    got = sorted(p.name for p in downloads.iterdir())
    assert got == [f"prometheus-2.53.2.linux-{goarch}.tar.gz"]
    assert (downloads / got[0]).read_bytes() == (release / got[0]).read_bytes()


def test_tarball_download_refuses_a_file_that_does_not_match_the_sums(release_server, tmp_path, tool_env) -> None:
    release, url = release_server
    downloads = tmp_path / "cache"
    downloads.mkdir()
    tampered = release.parent / "v9.9.9"
    tampered.mkdir()
    (tampered / "prometheus-9.9.9.linux-amd64.tar.gz").write_bytes(b"not what was signed off\n")
    (tampered / "sha256sums.txt").write_text(f"{'0' * 64}  prometheus-9.9.9.linux-amd64.tar.gz\n")
    tasks = [{"name": "download", "ansible.builtin.include_role": {"name": "ranklog.stack.prometheus",
                                                                   "tasks_from": "download"}}]
    extra = {"prometheus_install_method": "tarball", "prometheus_version": "9.9.9",
             "prometheus_release_url": url.replace("v2.53.2", "v9.9.9"),
             "prometheus_download_dir": str(downloads), "ansible_architecture": "x86_64"}
    proc = _play(tmp_path, tasks, extra, tool_env)
    assert proc.returncode != 0
    assert "checksum" in proc.stdout.lower(), proc.stdout[-3000:]
    assert not list(downloads.iterdir())


def test_managed_prometheus_yml_scrapes_the_same_ranklog_jobs(tmp_path, tool_env) -> None:
    """Package/tarball mode: the role's prometheus.yml carries the same ranklog jobs as the drop-in file."""
    role = REPO / "roles" / "prometheus"
    out = {name: tmp_path / name for name in ("prometheus.yml", "ranklog.yml")}
    tasks = [{"name": f"render {name}", "ansible.builtin.template": {"src": str(role / "templates" / src),
                                                                      "dest": str(out[name]), "mode": "0600"}}
             for name, src in (("prometheus.yml", "prometheus.yml.j2"), ("ranklog.yml", "ranklog.scrape.yml.j2"))]
    play_vars = {**yaml.safe_load((role / "defaults" / "main.yml").read_text()),
                 **yaml.safe_load((role / "vars" / "main.yml").read_text()),
                 "prometheus_rules_dir": str(tmp_path / "rules"), "prometheus_web_listen_address": "127.0.0.1:9090"}
    proc = _play(tmp_path, tasks, play_vars, tool_env)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    check = subprocess.run(["promtool", "check", "config", str(out["prometheus.yml"])], capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    managed = yaml.safe_load(out["prometheus.yml"].read_text())["scrape_configs"]
    dropin = yaml.safe_load(out["ranklog.yml"].read_text())["scrape_configs"]
    assert [job["job_name"] for job in managed] == ["prometheus", "ranklog-agent", "ranklog-archive", "alertmanager"]
    assert managed[1:3] == dropin


def test_alert_thresholds_are_role_variables(tmp_path, tool_env) -> None:
    """prometheus_ranklog_alert_thresholds re-renders ranklog.rules.yml; an unknown name fails, naming it."""
    rules_dir = tmp_path / "rules.d"
    base = {"prometheus_install_method": "none", "prometheus_rules_dir": str(rules_dir),
            "prometheus_scrape_config_dir": str(tmp_path / "scrape.d"), "prometheus_rule_files": [str(RULES_FILE)]}
    tasks = [{"name": "role", "ansible.builtin.import_role": {"name": "ranklog.stack.prometheus"}}]
    thresholds = {"error_burst_errors": 123, "silent_after": "7m", "unreadable_paths_for": "30s"}
    proc = _play(tmp_path, tasks, {**base, "prometheus_ranklog_alert_thresholds": thresholds}, tool_env)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    rules = {r["alert"]: r for g in yaml.safe_load((rules_dir / RULES_FILE.name).read_text())["groups"]
             for r in g["rules"] if "alert" in r}
    assert " ".join(rules["RanklogErrorBurst"]["expr"].split()).endswith("> 123")
    assert "420" in rules["RanklogRankSilent"]["expr"] and "7m" in rules["RanklogRankSilent"]["annotations"]["description"]
    assert rules["RanklogAgentUnreadablePaths"]["for"] == "30s"
    generated = {r["alert"]: r for g in yaml.safe_load(RULES_FILE.read_text())["groups"] for r in g["rules"] if "alert" in r}
    assert set(rules) == set(generated)
    assert all(rules[name] == generated[name] for name in generated
               if name not in {"RanklogErrorBurst", "RanklogRankSilent", "RanklogAgentUnreadablePaths"})

    bad = _play(tmp_path, tasks, {**base, "prometheus_ranklog_alert_thresholds": {"error_burst_errrors": 5}}, tool_env)
    assert bad.returncode != 0 and "error_burst_errrors: unknown threshold" in bad.stdout, bad.stdout[-3000:]


def test_runbook_names_every_threshold_the_role_variable_takes() -> None:
    import dataclasses

    from dashboards.rules import Thresholds

    runbook = (REPO / "dashboards" / "RUNBOOK.md").read_text()
    assert "prometheus_ranklog_alert_thresholds" in runbook
    missing = [f.name for f in dataclasses.fields(Thresholds) if f.name != "runbook_url" and f"`{f.name}`" not in runbook]
    assert not missing, f"RUNBOOK.md does not name these thresholds: {missing}"
