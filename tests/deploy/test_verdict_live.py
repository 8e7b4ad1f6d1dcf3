"""The verdict in the page, live: a real torchrun job fails, Prometheus fires, Alertmanager (the role's
configuration) calls the archive, and the people paged get one verdict that stays one.

Everything is real and on loopback: a torchrun job on torch's CPU build (gloo, 2 workers logging
through DeepSpeed's logger, ``--max-restarts 1``: in attempt 0 rank 1 raises a ValueError at step 2, in attempt 1 rank 0 fails
while resuming — two failures of one job, seconds apart), a ``ranklog agent`` reading its
``--log-dir`` with suspects off (this test proves the alert path; the direct push has its own test
in ``tests/archive/test_verdicts.py``), a ``ranklog archive`` with three verdict receivers
(:mod:`tests.helpers.verdict_receivers`: webhook, Slack-compatible, Grafana's documented annotations
API), Prometheus scraping and evaluating the generated rules every second (the test's own
config; the benchmark keeps Prometheus' defaults) and ``prometheus-alertmanager`` with the
alertmanager role's ``alertmanager.yml`` (rendered by Ansible) and a shorter ``group_interval``.

Expected: Alertmanager fires ``RanklogRankFailed`` for rank 1, the archive sends one verdict — rank 1,
``uncaught exception``, a report link that opens — and the second attempt's failure (rank 0) reaches
the archive as a second alert of the same job and joins the incident without paging again. The
regular receiver still gets the alerts (``continue``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.dashboards.live_stack import running_alertmanager, running_prometheus
from tests.deploy.conftest import render_role_template
from tests.helpers.agent_proc import running_agent
from tests.helpers.archive_proc import running_archive
from tests.helpers.net import wait_until
from tests.helpers.torchrun_job import running_torchrun
from tests.helpers.verdict_receivers import running_receivers

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (shutil.which("prometheus") and shutil.which("prometheus-alertmanager")),
                       reason="Prometheus/Alertmanager missing: apt-get install prometheus prometheus-alertmanager"),
]
JOB = "verdict-live"
FAILING_RANK = 1



def test_alertmanager_pages_one_verdict_and_a_second_alert_updates_it(tmp_path, tool_env, token_file) -> None:
    import yaml

    rules = tmp_path / "rules.yml"
    subprocess.run([sys.executable, "-m", "dashboards.rules", "-o", str(rules)], check=True, timeout=60,
                   cwd=Path(__file__).resolve().parents[2])
    with running_receivers() as receivers:
        grafana_token = tmp_path / "grafana.token"
        grafana_token.write_text(receivers.grafana_token + "\n")
        (tmp_path / "archive.yaml").write_text(yaml.safe_dump({"verdict": {
            "receivers": receivers.receivers_config(str(grafana_token))}}))
        with running_archive(tmp_path / "archive", token_file,
                             extra_args=["--config", str(tmp_path / "archive.yaml")]) as archive:
            am_config = tmp_path / "alertmanager.yml"
            render_role_template("alertmanager", "alertmanager.yml.j2", am_config, {
                "alertmanager_receivers": [{"name": "oncall", "webhook_configs": [{"url": f"{receivers.base}/oncall"}]}],
                "alertmanager_route": {"receiver": "oncall", "group_by": ["alertname", "training_job"],
                                       "group_wait": "1s", "group_interval": "2s", "repeat_interval": "1h"},
                "alertmanager_ranklog_verdict_url": f"{archive.url}/v1/alerts",
                "alertmanager_ranklog_verdict_token": archive.token,
                "alertmanager_ranklog_verdict_group_interval": "2s"}, tool_env)
            with running_alertmanager(tmp_path / "am", config_file=am_config) as alertmanager:
                _run_job_and_check(tmp_path, rules, archive, receivers, alertmanager.port, token_file)


def _run_job_and_check(tmp_path, rules, archive, receivers, am_port, token_file) -> None:
    logs = tmp_path / "torchrun"
    logs.mkdir()
    # restart_resume: in the second attempt rank 0 fails before it joins the group. With `restart` the
    # restarted group sometimes never connects on a loaded machine (gloo reads a peer's address left
    # from attempt 0: "Gloo connectFullMesh failed"), a consequence Alertmanager rightly inhibits, and
    # no second root cause reaches the incident.
    with running_agent([archive.url], token_file, tmp_path / "agent", presets=["torchrun"],
                       extra_args=["--torchrun-log-dirs", str(logs / "node0"), "--host", "node0",
                                   "--no-suspect-push"]) as agent, \
            running_prometheus(tmp_path / "prom", rules, [f"127.0.0.1:{agent.metrics_port}"],
                               [f"127.0.0.1:{archive.port}"], f"127.0.0.1:{am_port}") as prom, \
            running_torchrun(logs, JOB, ["--layout", "bracketed", "--fault", "restart_resume", "--fault-rank",
                                         str(FAILING_RANK), "--fault-step", "2", "--steps", "4", "--step-seconds", "0.3"],
                             nproc=2, max_restarts=1) as job:
        (page,) = wait_until(receivers.documents, 180, f"a verdict (Prometheus log: {prom.log_path})")
        assert page["kind"] == "verdict" and page["training_job"] == JOB
        assert (page["ranks"], page["hosts"], page["category"]) == ([FAILING_RANK], ["node0"], "uncaught exception")
        assert "ValueError: sample 1834 has 0 tokens" in page["decisive"]["text"]
        assert {t["source"] for t in page["triggers"]} == {"alertmanager"}
        report = httpx.get(page["report_url"], timeout=10)
        assert report.status_code == 200 and "uncaught exception" in report.text
        # The second attempt fails on rank 0: a second alert of the job reaches the incident.
        job.wait(timeout=120)

        seen: list = []

        def second_alert() -> bool:
            listed = httpx.get(f"{archive.url}/v1/alerts", headers={"Authorization": f"Bearer {archive.token}"},
                               timeout=10).json()["incidents"]
            seen[:] = listed
            mine = [i for i in listed if i["id"] == page["incident"]]
            return bool(mine) and any(t["rank"] == "0" for t in mine[0]["triggers"])

        def firing() -> str:
            alerts = httpx.get(f"http://127.0.0.1:{prom.port}/api/v1/alerts", timeout=10).json()["data"]["alerts"]
            return json.dumps([a["labels"] for a in alerts])

        try:
            wait_until(second_alert, 120, "rank 0's alert joining the incident")
        except TimeoutError as e:
            raise AssertionError(f"{e}; incidents {json.dumps(seen)}; Prometheus alerts {firing()}") from None
        time.sleep(3)  # its triage (retriage_interval) and any delivery
        documents = receivers.documents()
        assert [d["kind"] for d in documents].count("verdict") == 1, documents
        assert all(d["incident"] == page["incident"] and d["kind"] == "update" for d in documents[1:])
        assert len(receivers.annotations) == 1
        assert len([r for r in receivers.sent("/slack") if "*ranklog verdict*" in r.body["text"]]) == 1
        paged = {a["labels"]["alertname"] for r in receivers.sent("/oncall") for a in r.body["alerts"]}
        assert "RanklogRankFailed" in paged  # the regular receiver still gets the alert
        assert agent.scrape().value("ranklog_agent_suspects_total", result="sent") == 0
