"""Grafana file provisioning (dashboards provider, Prometheus and Loki datasources) and the reference
scrape config.

The Ansible roles copy these files as they are; the deployment-specific values have defaults here and
are plain YAML keys a role can override when templating: the Prometheus datasource's ``url`` (Grafana
and Prometheus on the monitoring host: ``http://127.0.0.1:9090``), the Loki datasource's ``url`` (the
archive, :data:`~dashboards.ARCHIVE_URL`) and its token, and the provider's ``path``
(:data:`DASHBOARDS_PATH`, where the role puts ``generated/dashboards/*.json``).

The Loki datasource is the archive's Loki API. Grafana sends the archive token as a custom header
(``Authorization: Bearer …``, ``httpHeaderName1``/``httpHeaderValue1``); the generated file reads it from
the environment of grafana-server (``$RANKLOG_ARCHIVE_TOKEN``, expanded by Grafana's provisioning),
and the grafana role writes the vault's token in its place.
"""

from __future__ import annotations

from typing import Any

from dashboards import (
    AGENT_JOB,
    ARCHIVE_JOB,
    ARCHIVE_TOKEN_ENV,
    ARCHIVE_URL,
    DASHBOARD_TAG,
    DATASOURCE_NAME,
    DATASOURCE_UID,
    LOGS_DATASOURCE_NAME,
    LOGS_DATASOURCE_UID,
)

DASHBOARDS_PATH = "/var/lib/grafana/dashboards/ranklog"
PROMETHEUS_URL = "http://127.0.0.1:9090"


def dashboard_provider() -> dict[str, Any]:
    return {"apiVersion": 1, "providers": [{
        "name": "ranklog", "orgId": 1, "folder": "ranklog", "type": "file",
        "disableDeletion": True, "allowUiUpdates": False, "updateIntervalSeconds": 60,
        "options": {"path": DASHBOARDS_PATH, "foldersFromFilesStructure": False},
    }]}


def datasource(url: str = PROMETHEUS_URL, archive_url: str = ARCHIVE_URL) -> dict[str, Any]:
    return {"apiVersion": 1, "datasources": [{
        "name": DATASOURCE_NAME, "uid": DATASOURCE_UID, "type": "prometheus", "access": "proxy", "url": url,
        "isDefault": False, "editable": False,
        "jsonData": {"httpMethod": "POST", "timeInterval": "15s", "prometheusType": "Prometheus"},
    }, {
        "name": LOGS_DATASOURCE_NAME, "uid": LOGS_DATASOURCE_UID, "type": "loki", "access": "proxy", "url": archive_url,
        "isDefault": False, "editable": False,
        "jsonData": {"maxLines": 1000, "timeout": 60, "httpHeaderName1": "Authorization"},
        "secureJsonData": {"httpHeaderValue1": f"Bearer ${{{ARCHIVE_TOKEN_ENV}}}"},
    }]}


def scrape_config(agents: list[str], archives: list[str], interval: str = "15s") -> dict[str, Any]:
    """The ``scrape_configs`` the rules and dashboards expect: the job names, and no ``honor_labels``.

    ranklog's series never carry a ``job`` label of their own (the training job is ``training_job``),
    so Prometheus' default ``honor_labels: false`` keeps the scrape job as ``job`` on every series.
    """
    def job(name: str, targets: list[str]) -> dict[str, Any]:
        return {"job_name": name, "scrape_interval": interval,
                "static_configs": [{"targets": targets, "labels": {"ranklog": DASHBOARD_TAG}}]}
    return {"scrape_configs": [job(AGENT_JOB, agents), job(ARCHIVE_JOB, archives)]}
