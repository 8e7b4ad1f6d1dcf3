"""Grafana dashboards and Prometheus rules for ranklog, written as code.

``python -m dashboards.generate`` (``make dashboards``) writes everything under
``dashboards/generated/``; a test fails when the checked-in output is out of date.

Contracts other parts of the project rely on (the Ansible roles in particular):

* Prometheus scrape jobs are named :data:`AGENT_JOB` and :data:`ARCHIVE_JOB`; ``job`` is the
  operator's scrape label on every series. The *training* job id is the label ``training_job``, so
  the rules and dashboards work with or without ``honor_labels`` (the reference scrape config,
  ``dashboards/generated/prometheus.scrape.yml``, leaves it at Prometheus' default, false).
* A node is the Prometheus ``instance`` of its agent.
* Dashboards read from the Prometheus datasource picked in their ``datasource`` template variable
  (:data:`DATASOURCE_VARIABLE`); the provisioned datasource (uid :data:`DATASOURCE_UID`) is only
  its default, so the dashboards work on any Prometheus datasource of an existing Grafana.
* Log panels, data links and annotations read the archive's Loki API through the Loki datasource in
  the ``logs`` variable (:data:`LOGS_VARIABLE`, default uid :data:`LOGS_DATASOURCE_UID`); their LogQL
  uses the record's labels (``job`` is the training job there, as in the archive).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

PACKAGE_DIR = Path(__file__).resolve().parent
GENERATED_DIR = PACKAGE_DIR / "generated"
RUNBOOK = PACKAGE_DIR / "RUNBOOK.md"
PROMTOOL_TESTS = PACKAGE_DIR / "tests" / "ranklog.rules.test.yml"

AGENT_JOB = "ranklog-agent"
ARCHIVE_JOB = "ranklog-archive"
DATASOURCE_UID = "ranklog-prometheus"
DATASOURCE_NAME = "ranklog Prometheus"
DATASOURCE_VARIABLE = "datasource"  # the dashboards' template variable holding the Prometheus datasource
DASHBOARD_TAG = "ranklog"
# The archive's Loki-compatible read API as a Grafana Loki datasource: logs panels, data links to
# Explore and the triage annotations read from the datasource picked in LOGS_VARIABLE.
LOGS_DATASOURCE_UID = "ranklog-archive"
LOGS_DATASOURCE_NAME = "ranklog archive (logs)"
LOGS_VARIABLE = "logs"
ARCHIVE_URL = "http://127.0.0.1:8470"  # the provisioned default; the grafana role sets the real one
ARCHIVE_TOKEN_ENV = "RANKLOG_ARCHIVE_TOKEN"  # Grafana expands it in the provisioning file

# Levels that count as errors in rates, bursts and "top error producers".
ERROR_LEVELS = "ERROR|CRITICAL"

# `ranklog_training_metric{name=…}` values the dashboards and rules read. Each must be in the agent's
# default allow-list (ranklog.agent.agent_config.DEFAULT_TRAINING_METRICS); a test checks it.
THROUGHPUT_METRIC = "perf/throughput"  # tokens/s per GPU, as verl logs it
TOKENS_PER_SECOND_METRIC = "tokens_per_second"  # whole-job tokens/s, as a ranklog logger user logs it
STEP_TIME_METRIC = "timing_s/step"
LOSS_METRICS = ("actor/pg_loss", "critic/vf_loss", "training/loss", "loss")
GRAD_NORM_METRICS = ("actor/grad_norm", "critic/grad_norm", "training/grad_norm", "grad_norm")

def load_dashboard_module(name: str) -> ModuleType:
    """Import ``dashboards/<name>.dashboard.py`` (the dot in the name rules out a plain import)."""
    path = PACKAGE_DIR / f"{name}.dashboard.py"
    spec = importlib.util.spec_from_file_location(f"dashboards._{name}_dashboard", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dashboard_names() -> list[str]:
    """Every dashboard, found as ``dashboards/<name>.dashboard.py``: adding a file adds a dashboard."""
    return sorted(path.name.removesuffix(".dashboard.py") for path in PACKAGE_DIR.glob("*.dashboard.py"))


def load_dashboards() -> dict[str, object]:
    """The grafanalib ``Dashboard`` of every ``*.dashboard.py`` file, by file stem."""
    return {name: load_dashboard_module(name).dashboard for name in dashboard_names()}
