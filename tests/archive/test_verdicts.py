"""The verdict receiver (``/v1/alerts``) of a real archive, fed by a real agent, sending to real HTTP receivers.

The records are the ``torchrun_cuda_oom`` scenario as torchrun wrote it (rank 1 dies of a CUDA OOM
at step 4, its peers then lose their gloo connection), read by a real ``ranklog agent``. The
notifications are Alertmanager's webhook shape (``version: "4"``; the live test in
``tests/deploy/test_verdict_live.py`` has a real Alertmanager send them). The receivers are
:mod:`tests.helpers.verdict_receivers`: a generic webhook, a Slack-compatible one and Grafana's
annotations API replayed from its documentation (no Grafana server can be installed here).

The scenario was recorded days ago, so the archives here look back far (``verdict.lookback``).
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
import yaml

from tests.helpers.agent_proc import Scrape, running_agent
from tests.helpers.archive_proc import running_archive
from tests.helpers.net import wait_until
from tests.helpers.verdict_receivers import VerdictReceivers, running_receivers

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "torchrun_cuda_oom"
TRUTH = json.loads((SCENARIO / "truth.json").read_text())
NODE = TRUTH["node"]


def notification(*alerts: dict, status: str = "firing") -> dict:
    """An Alertmanager webhook notification (version 4) of `alerts` grouped by training_job."""
    job = alerts[0]["labels"].get("training_job", "")
    group = {"training_job": job} if job else {}
    return {"version": "4", "groupKey": f'{{}}/{{alertname=~"Ranklog.+"}}:{{training_job="{job}"}}',
            "truncatedAlerts": 0, "status": status, "receiver": "ranklog-verdict",
            "groupLabels": group, "commonLabels": group, "commonAnnotations": {},
            "externalURL": "http://alertmanager:9093", "alerts": list(alerts)}


def alert(name: str, rank: int | None, job: str = "job", signature: str = "cuda_oom", status: str = "firing") -> dict:
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    labels = {"alertname": name, "training_job": job, "instance": "node0:9465", "job": "ranklog-agent",
              "severity": "critical", "component": "training", "signature": signature}
    if rank is not None:
        labels["rank"] = str(rank)
    return {"status": status, "labels": labels, "annotations": {"summary": f"{name} on rank {rank}"},
            "startsAt": now, "endsAt": "0001-01-01T00:00:00Z" if status == "firing" else now,
            "generatorURL": "http://prometheus:9090/graph", "fingerprint": f"{abs(hash((name, rank))):016x}"}


def scenario_copy(dest: Path, without_failing_rank: bool = False) -> Path:
    """The scenario's node folder (the torchrun --log-dir tree); optionally without the failing rank's
    files and the launcher's console, as if that node's agent lagged behind."""
    shutil.copytree(SCENARIO / "out" / NODE, dest)
    if without_failing_rank:
        (dest / "torchrun.console.log").unlink()
        for rank_dir in dest.glob(f"*/attempt_*/{TRUTH['rank']}"):
            shutil.move(rank_dir, dest.parent / "held-back")
    return dest


def restore_failing_rank(dest: Path) -> None:
    attempt = next(dest.glob("*/attempt_0"))
    shutil.move(dest.parent / "held-back", attempt / str(TRUTH["rank"]))


def archive_config(path: Path, receivers: VerdictReceivers, **verdict) -> Path:
    token = path.parent / "grafana.token"
    token.write_text(receivers.grafana_token + "\n")
    path.write_text(yaml.safe_dump({"verdict": {"receivers": receivers.receivers_config(str(token)),
                                                "lookback": "3650d", **verdict}}))
    return path



def post(archive, body: dict | bytes, path: str = "/v1/alerts", **headers: str) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(f"{archive.url}{path}", content=content, timeout=30,
                      headers={"Authorization": f"Bearer {archive.token}", "Content-Type": "application/json",
                               **headers})


def archive_metric(archive, name: str, **labels: str) -> float:
    return Scrape(httpx.get(f"{archive.url}/metrics", timeout=10).text).value(name, **labels)


def incidents(archive) -> list[dict]:
    answer = httpx.get(f"{archive.url}/v1/alerts", headers={"Authorization": f"Bearer {archive.token}"}, timeout=10)
    answer.raise_for_status()
    return answer.json()["incidents"]


def triaged(archive, runs: float) -> bool:
    return sum(archive_metric(archive, "ranklog_archive_triage_runs_total", status=s)
               for s in ("failure", "degraded", "no failure", "no data", "error")) >= runs


@pytest.fixture
def stack(tmp_path, token_file):
    """Receivers, an archive sending them verdicts, an agent (no suspects: alerts only) on a copy of
    the scenario without the failing rank's files."""
    logs = scenario_copy(tmp_path / "logs" / NODE, without_failing_rank=True)
    with running_receivers() as receivers, \
            running_archive(tmp_path / "archive", token_file,
                            extra_args=["--config", str(archive_config(tmp_path / "archive.yaml", receivers))]) as archive, \
            running_agent([archive.url], token_file, tmp_path / "agent", presets=["torchrun"],
                          extra_args=["--torchrun-log-dirs", str(logs), "--no-suspect-push", "--host", NODE]) as agent:
        agent.wait_idle(60)
        yield receivers, archive, agent, logs


def test_one_verdict_per_incident_updated_when_the_root_cause_arrives(stack) -> None:
    receivers, archive, agent, logs = stack
    # 1. A consequence alert while the failing rank's logs are still missing: the best verdict so far.
    answer = post(archive, notification(alert("RanklogFailureConsequence", 0, signature="collective_peer_lost")))
    assert answer.status_code == 202, answer.text
    assert answer.json()["accepted"] == 1 and len(answer.json()["incidents"]) == 1
    (first,) = wait_until(receivers.documents, 60, "the first verdict")
    incident = answer.json()["incidents"][0]
    assert first["kind"] == "verdict" and first["incident"] == incident and first["revision"] == 1
    assert first["training_job"] == "job" and first["status"] == "failure"
    assert TRUTH["rank"] not in first["ranks"], first
    # 2. The same alert again (Alertmanager's repeat): triaged again, nobody paged again.
    post(archive, notification(alert("RanklogFailureConsequence", 0, signature="collective_peer_lost")))
    wait_until(lambda: triaged(archive, 2), 30, "a second triage")
    assert len(receivers.documents()) == 1 and len(receivers.sent("/slack")) == 1
    # 3. The failing rank's node catches up; its CUDA OOM alert updates the incident.
    restore_failing_rank(logs)
    agent.wait_idle(60)
    answer = post(archive, notification(alert("RanklogCudaOutOfMemory", TRUTH["rank"])))
    assert answer.json()["incidents"] == [incident]
    wait_until(lambda: len(receivers.documents()) == 2 and len(receivers.sent("/slack")) == 2
               and receivers.sent("/grafana/api/annotations/1"), 60, "the update at every receiver")
    update = receivers.documents()[1]
    assert update["kind"] == "update" and update["incident"] == incident and update["revision"] == 2
    assert (update["ranks"], update["hosts"], update["category"]) == ([TRUTH["rank"]], [NODE], TRUTH["category"])
    assert update["step"] == TRUTH["step"] and TRUTH["decisive"] in update["decisive"]["text"]
    assert update["previous"]["ranks"] == first["ranks"] and update["confidence"] == "high"
    assert [t["alertname"] for t in update["triggers"]] == ["RanklogFailureConsequence"] * 2 + ["RanklogCudaOutOfMemory"]
    # Slack: the page, then an update naming what changed; both link the report.
    page, change = (r.body["text"] for r in receivers.sent("/slack"))
    assert "*ranklog verdict*" in page and "updated" not in page and f"<{first['report_url']}|" in page
    assert "*ranklog verdict updated*" in change and f"rank {TRUTH['rank']} on {NODE}" in change
    assert "was:" in change and "CUDA out of memory" in change
    # Grafana: one annotation, created then patched (documented API; token checked by the replay).
    assert len(receivers.annotations) == 1
    (annotation,) = receivers.annotations.values()
    assert [r.method for r in receivers.sent("/grafana/api/annotations") + receivers.sent("/grafana/api/annotations/1")] \
        == ["POST", "PATCH"]
    assert "training_job:job" in annotation["tags"] and "CUDA OOM" in annotation["tags"]
    assert annotation["dashboardUID"] == "ranklog-training" and update["report_url"] in annotation["text"]
    assert "CUDA OOM" in annotation["text"] and isinstance(annotation["time"], int)
    # The report link works without a token and shows the current verdict.
    page_html = httpx.get(update["report_url"], timeout=10)
    assert page_html.status_code == 200 and page_html.headers["content-type"].startswith("text/html")
    assert "CUDA OOM" in page_html.text and "no-store" in page_html.headers["cache-control"]
    assert httpx.get(update["report_url"][:-1] + "x", timeout=10).status_code == 404
    assert archive_metric(archive, "ranklog_archive_verdicts_sent_total", receiver="hook", kind="verdict") == 1
    assert archive_metric(archive, "ranklog_archive_verdicts_sent_total", receiver="hook", kind="update") == 1
    assert archive_metric(archive, "ranklog_archive_open_incidents") == 1


def test_resolved_closes_the_incident_and_the_next_failure_pages_again(stack, tmp_path, token_file) -> None:
    receivers, archive, _, _ = stack
    first = post(archive, notification(alert("RanklogFailureConsequence", 2, signature="collective_peer_lost")))
    wait_until(receivers.documents, 60, "the first verdict")
    resolved = notification(alert("RanklogFailureConsequence", 2, signature="collective_peer_lost", status="resolved"),
                            status="resolved")
    assert post(archive, resolved).json()["closed"] == first.json()["incidents"]
    assert archive_metric(archive, "ranklog_archive_open_incidents") == 0
    again = post(archive, notification(alert("RanklogFailureConsequence", 0, signature="collective_peer_lost")))
    assert again.json()["incidents"] != first.json()["incidents"]
    wait_until(lambda: len(receivers.documents()) == 2 and len(receivers.annotations) == 2, 60,
               "a page for the new incident")
    assert receivers.documents()[1]["kind"] == "verdict" and len(receivers.annotations) == 2
    listed = incidents(archive)
    assert [i["id"] for i in listed] == again.json()["incidents"] + first.json()["incidents"]
    assert listed[1]["closed_because"].startswith("Alertmanager resolved")


def test_a_failed_delivery_is_counted_and_sent_at_the_next_trigger(stack) -> None:
    receivers, archive, _, _ = stack
    receivers.fail_next("/slack", 500)
    post(archive, notification(alert("RanklogFailureConsequence", 0, signature="collective_peer_lost")))
    wait_until(receivers.documents, 60, "the verdict on the webhook")
    wait_until(lambda: archive_metric(archive, "ranklog_archive_verdict_delivery_failures_total", receiver="slack"),
               30, "the Slack failure counted")
    assert receivers.sent("/slack") == []
    post(archive, notification(alert("RanklogFailureConsequence", 2, signature="collective_peer_lost")))
    wait_until(lambda: receivers.sent("/slack"), 60, "the Slack message on the next trigger")
    assert "*ranklog verdict*" in receivers.sent("/slack")[0].body["text"]  # its first: a verdict, not an update
    assert len(receivers.documents()) == 1  # the webhook already had it


def test_refusals_name_the_problem(stack) -> None:
    receivers, archive, _, _ = stack
    body = notification(alert("RanklogCudaOutOfMemory", 1))
    assert httpx.post(f"{archive.url}/v1/alerts", json=body, timeout=10).status_code == 401
    otlp = post(archive, {"resourceLogs": []})
    assert otlp.status_code == 400 and "/v1/logs" in otlp.json()["error"]
    lines = post(archive, b'{"msg": "a"}\n{"msg": "b"}\n')
    assert lines.status_code == 400 and "/v1/ingest" in lines.json()["error"]
    assert post(archive, {"alerts": "no"}).status_code == 400
    assert post(archive, b"x" * (1024 * 1024 + 1)).status_code == 413
    misrouted = post(archive, body, path="/v1/ingest")
    assert misrouted.status_code == 400 and "/v1/alerts" in misrouted.json()["error"], misrouted.text
    pipeline = notification({**alert("RanklogArchiveDown", None), "labels": {"alertname": "RanklogArchiveDown",
                                                                              "instance": "archive1:8470"}})
    answer = post(archive, pipeline)
    assert answer.status_code == 202 and answer.json() == {"accepted": 0, "ignored": 1, "incidents": [], "closed": []}
    assert httpx.get(f"{archive.url}/v1/reports/{'a' * 22}", timeout=10).status_code == 404
    assert incidents(archive) == [] and receivers.requests == []
    described = httpx.get(f"{archive.url}/openapi.json", timeout=10).json()["paths"]
    assert {"/v1/alerts", "/v1/reports/{incident}"} <= set(described)


def test_a_restarted_archive_keeps_its_incidents_and_does_not_page_again(stack) -> None:
    receivers, archive, _, _ = stack
    post(archive, notification(alert("RanklogFailureConsequence", 0, signature="collective_peer_lost")))
    wait_until(lambda: receivers.annotations, 60, "the verdict at every receiver")
    archive.restart()
    answer = post(archive, notification(alert("RanklogFailureConsequence", 2, signature="collective_peer_lost")))
    assert answer.json()["incidents"] == [receivers.documents()[0]["incident"]]
    wait_until(lambda: triaged(archive, 1), 30, "a triage after the restart")
    assert len(receivers.documents()) == 1 and len(receivers.annotations) == 1


def test_an_agents_suspect_brings_the_verdict_without_any_alert(tmp_path, token_file) -> None:
    """The direct push: the agent reads the failure lines and pushes a suspect; nothing else calls."""
    logs = tmp_path / "logs" / NODE
    logs.mkdir(parents=True)
    with running_receivers() as receivers, \
            running_archive(tmp_path / "archive", token_file,
                            extra_args=["--config", str(archive_config(tmp_path / "archive.yaml", receivers))]) as archive, \
            running_agent([archive.url], token_file, tmp_path / "agent", presets=["torchrun"],
                          extra_args=["--torchrun-log-dirs", str(logs), "--host", NODE]) as agent:
        shutil.copytree(SCENARIO / "out" / NODE, logs, dirs_exist_ok=True)  # the job writes its logs now
        (doc,) = wait_until(receivers.documents, 60, "a verdict from the suspect")
        assert (doc["ranks"], doc["category"], doc["step"]) == ([TRUTH["rank"]], TRUTH["category"], TRUTH["step"])
        assert {t["source"] for t in doc["triggers"]} == {"agent"}
        assert {t["alertname"] for t in doc["triggers"]} == {"RanklogFailureSuspected"}
        assert agent.scrape().value("ranklog_agent_suspects_total", result="sent") >= 1
        assert archive_metric(archive, "ranklog_archive_alert_notifications_total", source="agent") >= 1
        assert archive_metric(archive, "ranklog_archive_verdict_latency_seconds_count") == 1


def test_without_receivers_alerts_are_taken_and_nothing_is_triaged(tmp_path, token_file) -> None:
    with running_archive(tmp_path / "archive", token_file) as archive:
        answer = post(archive, notification(alert("RanklogCudaOutOfMemory", 1)))
        assert answer.status_code == 202 and "no verdict.receivers" in answer.json()["note"]
        assert incidents(archive) == []


def test_alerts_whose_records_name_no_job_join_the_jobs_incident(stack) -> None:
    """torchrun's per-rank files carry no job id (its error.json does): the same failure alerts under
    training_job="" and "job"; triage finds the job and the two become one incident, one page."""
    receivers, archive, _, _ = stack
    named = post(archive, notification(alert("RanklogFailureConsequence", 0, signature="collective_peer_lost")))
    wait_until(lambda: receivers.annotations, 60, "the verdict at every receiver")
    anonymous = post(archive, notification(alert("RanklogFailureConsequence", 2, job="", signature="collective_peer_lost")))
    assert anonymous.json()["incidents"] != named.json()["incidents"]
    wait_until(lambda: triaged(archive, 3), 30, "the job-less incident and the job's triaged")
    listed = {i["id"]: i for i in incidents(archive)}
    merged = listed[anonymous.json()["incidents"][0]]
    assert merged["closed_because"].startswith("its records belong to job job")
    assert [t["rank"] for t in listed[named.json()["incidents"][0]]["triggers"]] == ["0", "2"]
    assert len(receivers.documents()) == 1 and len(receivers.annotations) == 1


def agent_down(host: str, starts_ns: int, status: str = "firing") -> dict:
    """Alertmanager's notification of RanklogAgentDown (the prometheus role labels targets with `node`)."""
    starts = datetime.fromtimestamp(starts_ns / 1e9, UTC).isoformat().replace("+00:00", "Z")
    labels = {"alertname": "RanklogAgentDown", "instance": f"{host}:9465", "job": "ranklog-agent", "node": host,
              "severity": "critical", "component": "agent"}
    return {"version": "4", "groupKey": f'{{}}/{{alertname=~"RanklogAgentDown"}}:{{instance="{host}:9465"}}',
            "truncatedAlerts": 0, "status": status, "receiver": "ranklog-verdict",
            "groupLabels": {"instance": f"{host}:9465"}, "commonLabels": labels, "commonAnnotations": {},
            "externalURL": "http://alertmanager:9093",
            "alerts": [{"status": status, "labels": labels, "annotations": {}, "startsAt": starts,
                        "endsAt": "0001-01-01T00:00:00Z" if status == "firing" else starts,
                        "generatorURL": "http://prometheus:9090/graph", "fingerprint": f"{abs(hash(host)):016x}"}]}


def test_an_agent_down_pages_the_lost_node_while_its_peers_still_wait(tmp_path, token_file) -> None:
    """torchrun_node_lost as the archive holds it half a second before node0's ranks noticed (each
    node's files shipped by its own agent, as on the node): node1's records end with its machine,
    node0's ranks wait in the all_reduce. No training alert fires (the
    rank-silence alerts of node1 are inhibited by its agent being down); Alertmanager sends the
    RanklogAgentDown context alert. The verdict: node1 lost, ranks 2-3. An agent that went down long
    after its node's last records is triaged too, and pages nobody."""
    from tests.triage.test_agent_outages import ALERT_DELAY, SECOND, as_shipped, host_end, triage

    scenario = Path(__file__).resolve().parents[1] / "scenarios" / "torchrun_node_lost"
    died = host_end(triage(scenario / "out"), "node1")
    logs = as_shipped("torchrun_node_lost", tmp_path / "logs", {"node0": died - SECOND // 2, "node1": died + SECOND})
    with running_receivers() as receivers, \
            running_archive(tmp_path / "archive", token_file, extra_args=["--config", str(archive_config(
                tmp_path / "archive.yaml", receivers, suspect_wait=2))]) as archive, \
            running_agent([archive.url], token_file, tmp_path / "agent0", sources=[f"{logs}/node0/**/*"],
                          extra_args=["--no-suspect-push", "--host", "node0"]) as agent0, \
            running_agent([archive.url], token_file, tmp_path / "agent1", sources=[f"{logs}/node1/**/*"],
                          extra_args=["--no-suspect-push", "--host", "node1"]) as agent1:
        agent0.wait_idle(60)
        agent1.wait_idle(60)
        # node0's agent restarts an hour later: triaged, and no page (an agent down is no failure by itself)
        answer = post(archive, agent_down("node0", died + 3600 * SECOND))
        assert answer.status_code == 202 and answer.json()["accepted"] == 1, answer.text
        wait_until(lambda: incidents(archive) and not any(i["closed_ns"] is None for i in incidents(archive)), 60,
                   "the incident of node0's outage closed without a page")
        post(archive, agent_down("node0", died + 3610 * SECOND, status="resolved"))
        assert receivers.documents() == []
        post(archive, agent_down("node1", died + ALERT_DELAY))
        post(archive, agent_down("node1", died + ALERT_DELAY))  # Alertmanager repeats: one outage, one triage
        (doc,) = wait_until(receivers.documents, 60, "the verdict of node1's outage")
        assert (doc["status"], doc["category"], doc["ranks"], doc["hosts"], doc["confidence"]) == (
            "failure", "node lost", [2, 3], ["node1"], "high")
        assert "its agent went down" in doc["summary"] and doc["training_job"] == "job"
        assert {t["alertname"] for t in doc["triggers"]} == {"RanklogAgentDown"}
        listing = httpx.get(f"{archive.url}/v1/alerts", headers={"Authorization": f"Bearer {archive.token}"},
                            timeout=10).json()
        assert [(o["host"], o["until_ns"] is None) for o in listing["agent_outages"]] == [("node0", False),
                                                                                            ("node1", True)]
        archive.restart()  # the book survives a restart
        listing = httpx.get(f"{archive.url}/v1/alerts", headers={"Authorization": f"Bearer {archive.token}"},
                            timeout=10).json()
        assert [(o["host"], o["until_ns"] is None) for o in listing["agent_outages"]] == [("node0", False),
                                                                                            ("node1", True)]
