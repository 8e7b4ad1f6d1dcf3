"""testinfra, through the rollout's own inventory: services, listeners, files, unit hardening."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import testinfra

from tests.container.cluster import Cluster, PlaybookRun
from tests.container.conftest import MONITORING_HOST, TRAINING_NODES

pytestmark = [pytest.mark.container, pytest.mark.slow]

NODE_SERVICES = ["ranklog-agent.service", "ranklog-integrity.timer"]
MON_SERVICES = ["ranklog-archive.service", "prometheus.service", "prometheus-alertmanager.service"]
HARDENED = {
    TRAINING_NODES[0]: ["ranklog-agent.service"],
    MONITORING_HOST: MON_SERVICES,
}
DOCKER_DNS = "127.0.0.11"  # Docker's embedded resolver listens inside every container on a user network


@pytest.fixture(scope="module")
def hosts(cluster: Cluster, converged: PlaybookRun) -> dict:
    """testinfra hosts from the generated inventory (ansible:// calls ansible-inventory: venv bin on PATH)."""
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    return {name: testinfra.get_host(f"ansible://{name}?ansible_inventory={cluster.inventory}")
            for name in [*TRAINING_NODES, MONITORING_HOST]}


def _tcp_listeners(host) -> set[str]:
    return {s for s in host.socket.get_listening_sockets()
            if s.startswith("tcp://") and not s.startswith(f"tcp://{DOCKER_DNS}:")}


@pytest.mark.parametrize("name", TRAINING_NODES)
def test_training_node_services(hosts, name) -> None:
    host = hosts[name]
    for unit in NODE_SERVICES:
        service = host.service(unit)
        assert service.is_running and service.is_enabled, unit
    for unit in ("prometheus.service", "prometheus-alertmanager.service", "ranklog-archive.service"):
        assert not host.service(unit).is_running, f"{unit} must not run on a training node"


def test_monitoring_host_services(hosts) -> None:
    host = hosts[MONITORING_HOST]
    for unit in MON_SERVICES:
        service = host.service(unit)
        assert service.is_running and service.is_enabled, unit
    assert not host.service("ranklog-agent.service").is_running


@pytest.mark.parametrize("name", TRAINING_NODES)
def test_training_node_listens_only_where_configured(hosts, cluster: Cluster, name) -> None:
    ip = cluster.ip(name)
    assert _tcp_listeners(hosts[name]) == {f"tcp://{ip}:9465", "tcp://0.0.0.0:22", "tcp://:::22"}


def test_monitoring_host_listens_only_where_configured(hosts, cluster: Cluster) -> None:
    ip = cluster.ip(MONITORING_HOST)
    assert _tcp_listeners(hosts[MONITORING_HOST]) == {
        f"tcp://{ip}:8470", f"tcp://{ip}:9090", f"tcp://{ip}:9093", "tcp://0.0.0.0:22", "tcp://:::22"}


@pytest.mark.parametrize("name", TRAINING_NODES)
def test_agent_files_owners_and_modes(hosts, name) -> None:
    host = hosts[name]
    token = host.file("/etc/ranklog/agent.token")
    assert (token.user, token.group, token.mode) == ("root", "ranklog", 0o640)
    config = host.file("/etc/ranklog/agent.yaml")
    assert (config.user, config.group, config.mode) == ("root", "ranklog", 0o640)
    assert "token:" not in config.content_string and "http://" in config.content_string
    log_dir = host.file("/var/log/ranklog")
    assert log_dir.is_directory and (log_dir.user, log_dir.group, log_dir.mode) == ("root", "ranklog", 0o2775)
    venv = host.file("/opt/ranklog/bin/ranklog")
    assert venv.user == "root" and not venv.mode & 0o022, "the code must not be writable by the service"


def test_archive_and_monitoring_files(hosts) -> None:
    host = hosts[MONITORING_HOST]
    tokens = host.file("/etc/ranklog/archive.tokens")
    assert (tokens.user, tokens.group, tokens.mode) == ("root", "ranklog", 0o640)
    root = host.file("/var/lib/ranklog-archive")
    assert (root.user, root.group, root.mode) == ("ranklog", "ranklog", 0o750)
    alertmanager = host.file("/etc/prometheus/alertmanager.yml")
    assert (alertmanager.user, alertmanager.group, alertmanager.mode) == ("root", "prometheus", 0o640)
    assert host.file("/etc/prometheus/rules/ranklog.rules.yml").exists


@pytest.mark.parametrize("name", [*TRAINING_NODES, MONITORING_HOST])
def test_no_secret_is_world_readable(hosts, name) -> None:
    # Training nodes carry the Debian package's unmanaged example alertmanager.yml: only check managed dirs.
    dirs = "/etc/ranklog /etc/prometheus /etc/grafana" if name == MONITORING_HOST else "/etc/ranklog"
    found = hosts[name].check_output(
        f"find {dirs} -xdev -type f -perm /o+r "
        "\\( -name '*token*' -o -name 'alertmanager.yml' -o -name 'grafana.ini' \\) 2>/dev/null || true")
    assert found.strip() == ""


# The agent reads every training user's logs with CAP_DAC_READ_SEARCH and nothing else (bit 2); it
# sees the real /tmp because the cluster follows Ray sessions and torchrun trees (roles/ranklog_agent).
CAPABILITIES = {"ranklog-agent.service": ("cap_dac_read_search", "0000000000000004")}
PRIVATE_TMP = {"ranklog-agent.service": "no"}


@pytest.mark.parametrize(("name", "unit"), [(h, u) for h, units in HARDENED.items() for u in units])
def test_unit_hardening(hosts, name, unit) -> None:
    host = hosts[name]
    props = dict(line.split("=", 1) for line in host.check_output(
        f"systemctl show -p ProtectSystem,NoNewPrivileges,PrivateTmp,CapabilityBoundingSet,AmbientCapabilities,"
        f"SystemCallFilter,User,MainPID,ProtectHome,RestrictSUIDSGID {unit}").splitlines())
    cap_name, cap_mask = CAPABILITIES.get(unit, ("", "0000000000000000"))
    assert props["ProtectSystem"] == "strict"
    assert props["NoNewPrivileges"] == "yes"
    assert props["PrivateTmp"] == PRIVATE_TMP.get(unit, "yes")
    assert props["RestrictSUIDSGID"] == "yes"
    assert props["CapabilityBoundingSet"] == cap_name
    assert props["AmbientCapabilities"] == cap_name
    assert props["SystemCallFilter"], "no system call filter"
    assert props["User"] in ("ranklog", "prometheus")
    status = host.file(f"/proc/{props['MainPID']}/status").content_string
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    # Effective, ambient and bounding sets hold exactly that capability, with NoNewPrivileges on.
    for key in ("CapEff", "CapAmb", "CapBnd"):
        assert fields[key].strip() == cap_mask, (key, fields[key])
    assert fields["NoNewPrivs"].strip() == "1"
    if unit == "ranklog-agent.service":  # its prctl passes the unit's system call filter (agent/huge_pages.py)
        assert fields["THP_enabled"].strip() == "0"
    uid = fields["Uid"].split()[0]
    assert uid != "0", f"{unit} runs as root"
