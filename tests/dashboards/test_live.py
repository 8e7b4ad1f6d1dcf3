"""The dashboards and rules against the real thing: archive, agent, Prometheus, Alertmanager, a failing job.

One module-scoped stack (about a minute): a live archive and agent read a scripted failing job
(:mod:`tests.dashboards.scenario`); the agent starts with a wrong token, so both the agent's ship
failures and the archive's rejections are real, then the token is fixed. Prometheus scrapes both
every second with the generated scrape layout and evaluates the generated rules (thresholds
lowered through ``python -m dashboards.rules --set``); Alertmanager delivers to a webhook run here.
The agent parses in two worker processes, and one of them is killed once the job failed.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from dashboards import AGENT_JOB, PACKAGE_DIR
from dashboards.queries import (
    PROMETHEUS_SERIES,
    dashboard_queries,
    metric_names,
    recorded_names,
    rule_queries,
    substitute,
)
from tests.dashboards.live_stack import running_alertmanager, running_prometheus, running_webhook
from tests.dashboards.scenario import FAILING_RANK, HOST, JOB, RANKS, FailingJob
from tests.helpers.agent_proc import Scrape, parse_worker_pids, running_agent
from tests.helpers.archive_proc import running_archive
from tests.helpers.net import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (shutil.which("prometheus") and shutil.which("prometheus-alertmanager")),
                       reason="Prometheus/Alertmanager missing: apt-get install prometheus prometheus-alertmanager "
                              "(make system)"),
]

WINDOW = 15  # seconds: error-burst and signature windows in the lowered rules
LOWERED = {
    "error_burst_errors": "5", "error_burst_window": f"{WINDOW}s", "error_burst_for": "0s",
    "signature_window": f"{WINDOW}s", "signature_for": "0s",
    "progress_resolution": "3s", "step_time_window": "20s", "stall_lookback": "5m",
    "throughput_baseline": "20s", "silent_after": "30s", "others_fresh_within": "10s",
    "backlog_growth_window": "10s", "rejected_window": f"{WINDOW}s", "rejected_for": "0s",
    "parse_worker_restarts_window": f"{WINDOW}s", "straggler_for": "0s",
}
SIGNATURE_ALERTS = {"RanklogCudaOutOfMemory", "RanklogNcclTimeout"}
NODE_ALERTS = {"RanklogArchiveRejectingIngest", "RanklogAgentParseWorkerRestarted"}  # no rank in them
WANTED_ALERTS = SIGNATURE_ALERTS | NODE_ALERTS | {"RanklogErrorBurst", "RanklogStraggler"}
# Panel queries allowed to return no data in this scenario, and why.
EXPECTED_EMPTY = {
    ("pipeline.json", "Parse errors and lost bytes", "B"):
        "lost bytes need a file truncated or deleted before the agent read it, a race this scenario does not stage",
}


def render_rules(path: Path) -> Path:
    args = [sys.executable, "-m", "dashboards.rules", "-o", str(path)]
    for key, value in LOWERED.items():
        args += ["--set", f"{key}={value}"]
    subprocess.run(args, cwd=PACKAGE_DIR.parent, check=True, timeout=60)
    return path


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("live")
    token = secrets.token_hex(16)
    (tmp / "archive.tokens").write_text(token + "\n")
    agent_token = tmp / "agent.tokens"
    agent_token.write_text("not-the-archive-token\n")
    rules = render_rules(tmp / "rules.yml")
    job = FailingJob(tmp / "logs")
    with running_webhook() as webhook, running_alertmanager(tmp / "am", webhook.url) as am, \
            running_archive(tmp / "archive", tmp / "archive.tokens") as archive, \
            running_agent([archive.url], agent_token, tmp / "agent-state", sources=[f"{tmp / 'logs'}/*.log:ranklog"],
                          extra_args=["--unauthorized-retry", "1s", "--host", HOST, "--parse-workers", "2"]) as agent:
        job.start()
        try:
            agent_target = f"127.0.0.1:{agent.metrics_port}"
            archive_target = f"127.0.0.1:{archive.port}"
            with running_prometheus(tmp / "prom", rules, [agent_target], [archive_target], f"127.0.0.1:{am.port}") as prom:
                started = time.monotonic()
                agent.wait_for(lambda s: s.value("ranklog_agent_ship_failures_total", reason="unauthorized") > 0,
                               30, "a refused token")
                wait_until(lambda: len(prom.query("up == 1")["result"]) == 2, 30, "both targets scraped")
                # `new_or_increase` only trusts a counter's birth once Prometheus has watched its target
                # for a whole window; fix the token and fail after that, as a real job fails long after start.
                time.sleep(max(0.0, started + WINDOW + 2 - time.monotonic()))
                agent_token.write_text(token + "\n")
                job.fail()
                agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") > 0, 30, "records shipped")
                os.kill(parse_worker_pids(agent.proc.pid)[0], signal.SIGKILL)
                wait_until(lambda: {a["labels"]["alertname"] for a in webhook.alerts()} >= WANTED_ALERTS, 60,
                           f"webhook notified of {sorted(WANTED_ALERTS)} (log: {prom.log_path})")
                yield SimpleNamespace(prom=prom, webhook=webhook, agent=agent, archive=archive,
                                      agent_target=agent_target, archive_target=archive_target)
        finally:
            job.stop()


def exported(text: str) -> set[str]:
    """Every series name a /metrics page declares (a labelled metric with no child yet included)."""
    names = {sample.name for sample in Scrape(text).samples}
    for family, kind in re.findall(r"^# TYPE (\S+) (\w+)$", text, re.M):
        names.add(family)
        if kind == "counter" and not family.endswith("_total"):
            names.add(f"{family}_total")
        if kind == "histogram":
            names.update(f"{family}{suffix}" for suffix in ("_bucket", "_sum", "_count"))
    return names


def test_every_metric_used_by_dashboards_and_rules_is_exported(live):
    import httpx

    names = exported(live.agent.metrics_text()) | exported(httpx.get(f"{live.archive.url}/metrics", timeout=10).text)
    used = {name for q in [*dashboard_queries(), *rule_queries()] for name in metric_names(q.expr)}
    missing = used - names - recorded_names() - PROMETHEUS_SERIES
    assert missing == set(), f"used in dashboards/rules but exported by neither agent nor archive: {sorted(missing)}"


def test_every_panel_query_evaluates_and_returns_data(live):
    empty, errors, seen = [], [], set()
    for query in dashboard_queries():
        file, _, rest = query.where.partition(": ")
        try:
            result = live.prom.query(substitute(query.expr))["result"]
        except AssertionError as exc:
            errors.append(f"{query.where}: {exc}")
            continue
        key = (file, *re.fullmatch(r"panel '(.*)' (\w+)", rest).groups()) if rest.startswith("panel") else (file, rest)
        seen.add(key)
        if not result and key not in EXPECTED_EMPTY:
            empty.append(query.where)
    assert errors == []
    assert empty == [], "panel queries without data (add to EXPECTED_EMPTY only with a reason)"
    assert set(EXPECTED_EMPTY) <= seen, "EXPECTED_EMPTY names a query that no longer exists"


def test_panel_queries_with_selected_values(live):
    """Real selections, formatted as Grafana formats a multi-value regex variable, evaluate and narrow."""
    values = {"$training_job": JOB, "$node": live.agent_target.replace(".", "\\\\."), "$rank": f"(0|{FAILING_RANK})"}
    errors = []
    for query in dashboard_queries():
        try:
            live.prom.query(substitute(query.expr, values))
        except AssertionError as exc:
            errors.append(f"{query.where}: {exc}")
    assert errors == []
    by_rank = 'sum by (rank) (ranklog_log_records_total{training_job=~"$training_job", instance=~"$node", rank=~"$rank"})'
    ranks = {r["metric"]["rank"] for r in live.prom.query(substitute(by_rank, values))["result"]}
    assert ranks == {"0", str(FAILING_RANK)}


def _fired(live, name: str) -> list[dict[str, str]]:
    """Labels of every `name` alert that was firing at some point in the last 5 minutes (ALERTS history)."""
    expr = f'max_over_time(ALERTS{{alertname="{name}", alertstate="firing"}}[5m])'
    return [series["metric"] for series in live.prom.query(expr)["result"]]


def test_error_burst_fired_for_the_failing_rank_only(live):
    fired = _fired(live, "RanklogErrorBurst")
    assert {(a["instance"], a["training_job"], a["rank"]) for a in fired} == {(live.agent_target, JOB, str(FAILING_RANK))}


def test_straggler_fired_for_the_slow_rank_only(live):
    """Rank 3 steps every other tick (twice its peers' step time): RanklogStraggler names it, from
    ranklog_rank_step_seconds as the live agent exports it."""
    fired = _fired(live, "RanklogStraggler")
    assert {(a["instance"], a["training_job"], a["rank"]) for a in fired} == {(live.agent_target, JOB, str(FAILING_RANK))}
    seconds = {s["metric"]["rank"]: float(s["value"][1]) for s in live.prom.query(
        f'ranklog_rank_step_seconds{{training_job="{JOB}"}}')["result"]}
    assert seconds[str(FAILING_RANK)] > 1.5 * max(v for rank, v in seconds.items() if rank != str(FAILING_RANK))


def test_scraped_without_honor_labels_the_job_label_stays_the_scrape_job(live):
    """The dashboards' promise to an existing stack: no ``honor_labels``, no ``exported_job``."""
    import httpx
    import yaml

    loaded = yaml.safe_load(httpx.get(f"{live.prom.url}/api/v1/status/config", timeout=10).json()["data"]["yaml"])
    assert [job.get("honor_labels", False) for job in loaded["scrape_configs"]] == [False, False]
    series = live.prom.query('count by (job, training_job, exported_job) (ranklog_log_records_total)')["result"]
    labels = [s["metric"] for s in series]
    assert {"job": AGENT_JOB, "training_job": JOB} in labels
    assert all(found.get("job") == AGENT_JOB and "exported_job" not in found for found in labels), labels


def test_failure_signature_alerts_name_the_rank(live):
    oom = _fired(live, "RanklogCudaOutOfMemory")
    assert [(a["rank"], a["signature"], a["severity"]) for a in oom] == [(str(FAILING_RANK), "cuda_oom", "critical")]
    timeouts = _fired(live, "RanklogNcclTimeout")
    assert {a["rank"] for a in timeouts} == {str(r) for r in range(RANKS) if r != FAILING_RANK}


def test_archive_rejections_of_the_wrong_token_fired(live):
    fired = _fired(live, "RanklogArchiveRejectingIngest")
    assert {(a["instance"], a["reason"]) for a in fired} >= {(live.archive_target, "unauthorized")}


def test_a_killed_parse_worker_fired_its_alert_and_was_replaced(live):
    fired = _fired(live, "RanklogAgentParseWorkerRestarted")
    assert [(a["instance"], a["severity"]) for a in fired] == [(live.agent_target, "warning")]
    assert live.agent.scrape().value("ranklog_agent_parse_worker_restarts_total") == 1
    assert len(parse_worker_pids(live.agent.proc.pid)) == 2
    delivered = {a["labels"]["alertname"]: a for a in live.webhook.alerts()}["RanklogAgentParseWorkerRestarted"]
    assert live.agent_target in delivered["annotations"]["description"]
    assert delivered["annotations"]["runbook_url"].endswith("#ranklogagentparseworkerrestarted")


def test_alertmanager_delivers_with_summary_and_runbook(live):
    delivered = {a["labels"]["alertname"]: a for a in live.webhook.alerts()}
    for name in WANTED_ALERTS - NODE_ALERTS:
        alert = delivered[name]
        assert alert["status"] == "firing"
        assert f"rank {alert['labels']['rank']}" in alert["annotations"]["summary"]
        assert live.agent_target in alert["annotations"]["description"]
        assert alert["annotations"]["runbook_url"].endswith(f"#{name.lower()}")
