"""prometheus_remote_write: the role's prometheus.yml sends the agents' series to a long-term store.

Real processes on loopback: an archive and an agent (its /metrics are the series), the role's
prometheus.yml.j2 rendered by ansible-playbook with an inventory whose agent and archive listen on
127.0.0.1, checked with promtool, run by Debian's Prometheus, remote-writing to Debian's
VictoriaMetrics; the agent's series are then queried back from VictoriaMetrics.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from tests.deploy.conftest import BIN, REPO
from tests.helpers.agent_proc import running_agent
from tests.helpers.archive_proc import running_archive
from tests.helpers.net import free_port, wait_for_port
from tests.helpers.procs import spawn, stop

ROLE = REPO / "roles" / "prometheus"


def _render(tmp: Path, env: dict[str, str], agent: str, archive: str, extra: dict) -> Path:
    inventory = {"all": {"vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
                         "children": {
                             "monitoring": {"hosts": {"localhost": None}},
                             "training_nodes": {"hosts": {"node-a": {"ranklog_agent_metrics_listen": agent}}},
                             "ranklog_archive": {"hosts": {"obs-a": {"ranklog_archive_listen": archive}}}}}}
    (tmp / "hosts.yml").write_text(yaml.safe_dump(inventory))
    out = tmp / "prometheus.yml"
    task = {"name": "render", "ansible.builtin.template": {"src": str(ROLE / "templates" / "prometheus.yml.j2"),
                                                           "dest": str(out), "mode": "0600",
                                                           "validate": "promtool check config %s"}}
    (tmp / "play.yml").write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": [task]}]))
    play_vars = {**yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()),
                 **yaml.safe_load((ROLE / "vars" / "main.yml").read_text()),
                 "prometheus_rules_dir": str(tmp / "rules"), "prometheus_scrape_interval": "1s", **extra}
    (tmp / "vars.json").write_text(json.dumps(play_vars))
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(tmp / "hosts.yml"), "-e", f"@{tmp / 'vars.json'}",
                           str(tmp / "play.yml")], capture_output=True, text=True, env=env, timeout=300, cwd=tmp)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return out


def test_remote_write_is_off_by_default(tmp_path, tool_env) -> None:
    rendered = _render(tmp_path, tool_env, "127.0.0.1:9465", "127.0.0.1:8470", {})
    assert "remote_write" not in yaml.safe_load(rendered.read_text())


@pytest.mark.slow
def test_agents_series_reach_victoriametrics(tmp_path, tool_env) -> None:
    token = tmp_path / "tokens"
    token.write_text("rw-token\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "train.log").write_text("".join(f"2026-12-04 10:00:0{i},000 - trainer - ERROR - step {i} failed\n"
                                            for i in range(5)))
    vm_port, prom_port = free_port(), free_port()
    vm = spawn(["victoria-metrics", f"-httpListenAddr=127.0.0.1:{vm_port}", f"-storageDataPath={tmp_path / 'vm'}",
                "-search.latencyOffset=0s"], log_path=tmp_path / "vm.log")
    try:
        wait_for_port(vm_port, timeout=30, process=vm)
        with running_archive(tmp_path / "archive", token) as archive, \
                running_agent(archive.url, token, tmp_path / "state", sources=[f"{logs}/*.log:python"]) as agent:
            rendered = _render(tmp_path, tool_env, f"127.0.0.1:{agent.metrics_port}", f"127.0.0.1:{archive.port}",
                               {"prometheus_remote_write": [{"url": f"http://127.0.0.1:{vm_port}/api/v1/write",
                                                             "queue_config": {"batch_send_deadline": "1s"}}]})
            assert yaml.safe_load(rendered.read_text())["remote_write"][0]["url"].endswith(f":{vm_port}/api/v1/write")
            prom = spawn(["prometheus", f"--config.file={rendered}", f"--storage.tsdb.path={tmp_path / 'prom'}",
                          f"--web.listen-address=127.0.0.1:{prom_port}"], log_path=tmp_path / "prometheus.log")
            try:
                deadline, series = time.monotonic() + 90, []
                while time.monotonic() < deadline:
                    answer = httpx.get(f"http://127.0.0.1:{vm_port}/api/v1/query", timeout=10,
                                       params={"query": 'ranklog_log_records_total{job="ranklog-agent"}'}).json()
                    series = answer["data"]["result"]
                    if sum(float(s["value"][1]) for s in series) >= 5:
                        break
                    time.sleep(1)
                assert series, (tmp_path / "prometheus.log").read_text()[-3000:]
                assert sum(float(s["value"][1]) for s in series if s["metric"].get("level") == "ERROR") == 5
                assert {s["metric"]["instance"] for s in series} == {f"127.0.0.1:{agent.metrics_port}"}
                archive_up = httpx.get(f"http://127.0.0.1:{vm_port}/api/v1/query", timeout=10,
                                       params={"query": 'up{job="ranklog-archive"}'}).json()["data"]["result"]
                assert [s["value"][1] for s in archive_up] == ["1"]
            finally:
                stop(prom)
    finally:
        stop(vm)
