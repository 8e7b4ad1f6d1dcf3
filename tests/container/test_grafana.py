"""The Grafana role's provisioning on mon1, and (with GRAFANA_DEB=…) the running service.

Grafana's server cannot be installed here (no package source carries it), so by default the role
runs with `grafana_install_method: none` and only its provisioning is checked; with a local
package in GRAFANA_DEB the role installs it and the service checks run too.
"""

from __future__ import annotations

import hashlib

import httpx
import pytest
import yaml

from tests.container.cluster import Cluster
from tests.container.conftest import MONITORING_HOST
from tests.container.docker_env import REPO

pytestmark = [pytest.mark.container, pytest.mark.slow]

GENERATED = REPO / "dashboards" / "generated"


def _remote(cluster: Cluster, path: str) -> str:
    return cluster.exec(MONITORING_HOST, "cat", path)


def test_datasources_are_the_generated_ones_pointing_at_this_prometheus_and_archive(cluster: Cluster, converged) -> None:
    generated = yaml.safe_load((GENERATED / "grafana/provisioning/datasources/ranklog.yml").read_text())
    deployed = yaml.safe_load(_remote(cluster, "/etc/grafana/provisioning/datasources/ranklog.yml"))
    source, logs = deployed["datasources"]
    original, original_logs = generated["datasources"]
    assert source["url"] == f"http://{cluster.ip(MONITORING_HOST)}:9090"
    assert {k: v for k, v in source.items() if k != "url"} == {k: v for k, v in original.items() if k != "url"}
    # the logs datasource: the archive's Loki API, with the rollout token instead of the generated placeholder
    assert logs["type"] == "loki" and logs["url"].endswith(":8470") and logs["url"].startswith("http://")
    header = logs["secureJsonData"]["httpHeaderValue1"]
    assert header.startswith("Bearer ") and len(header) > len("Bearer ") + 16 and "$" not in header
    assert {k: v for k, v in logs.items() if k not in ("url", "secureJsonData")} == {
        k: v for k, v in original_logs.items() if k not in ("url", "secureJsonData")}


def test_dashboards_are_provisioned_where_the_provider_looks(cluster: Cluster, converged) -> None:
    provider_file = GENERATED / "grafana/provisioning/dashboards/ranklog.yml"
    assert _remote(cluster, "/etc/grafana/provisioning/dashboards/ranklog.yml") == provider_file.read_text().strip()
    path = yaml.safe_load(provider_file.read_text())["providers"][0]["options"]["path"]
    dashboards = sorted((GENERATED / "dashboards").glob("*.json"))
    assert dashboards
    for dashboard in dashboards:
        remote = cluster.exec(MONITORING_HOST, "sha256sum", f"{path}/{dashboard.name}").split()[0]
        assert remote == hashlib.sha256(dashboard.read_bytes()).hexdigest(), dashboard.name


def test_grafana_service(cluster: Cluster, converged, grafana_deb: str) -> None:
    if not grafana_deb:
        pytest.skip("GRAFANA_DEB not set: Grafana's server package is not available on this machine "
                    "(set GRAFANA_DEB=path/to/grafana_*.deb to run the service check)")
    assert cluster.exec(MONITORING_HOST, "systemctl", "is-active", "grafana-server", check=False) == "active"
    health = httpx.get(f"http://{cluster.ip(MONITORING_HOST)}:3000/api/health", timeout=10)
    assert health.status_code == 200 and health.json()["database"] == "ok"
    search = httpx.get(f"http://{cluster.ip(MONITORING_HOST)}:3000/api/search", timeout=10,
                       auth=("admin", converged_admin_password(cluster)))
    assert search.status_code == 200
    assert {d["uid"] for d in search.json() if d["type"] == "dash-db"} >= {"ranklog-training"}


def converged_admin_password(cluster: Cluster) -> str:
    return yaml.safe_load(cluster.inventory.read_text())["all"]["vars"]["grafana_admin_password"]
