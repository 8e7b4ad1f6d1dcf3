"""End to end on the rolled-out cluster: a failing 6-rank job → archive → triage → Prometheus → alert.

3 training nodes × 2 ranks run under `ranklog run`; rank 3 (node2) dies of a CUDA OOM, the other
ranks report the NCCL watchdog timeout. The controller then queries the archive over the internal
network, asks `ranklog triage` for the culprit, checks every Prometheus target is up, waits for
the CUDA OOM alert to reach the webhook receiver through Alertmanager, and for the archive's
verdict (the roles' verdict route and receivers) with a report link that opens.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.container.cluster import Cluster
from tests.container.conftest import JOBS, MONITORING_HOST, TRAINING_NODES
from tests.container.docker_env import docker
from tests.helpers.procs import ranklog_cmd

pytestmark = [pytest.mark.container, pytest.mark.slow]

JOB = "e2e-oom"
FAIL_RANK = 3
RANKS_PER_NODE = 2
WORLD = len(TRAINING_NODES) * RANKS_PER_NODE


def _poll(what: str, fn, timeout: float, interval: float = 2.0):
    """fn() until it returns something truthy; fail naming `what` and the last value otherwise."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what} (last: {str(last)[:1500]})")


@pytest.fixture(scope="module")
def failed_job(cluster: Cluster, converged) -> dict[int, int]:
    """Run the job on every training node; returns rank → exit status."""
    procs = {}
    for index, name in enumerate(TRAINING_NODES):
        node = cluster.nodes[name]
        docker("cp", str(JOBS / "failing_rank.py"), f"{node.container_id}:/tmp/failing_rank.py")
        for local in range(RANKS_PER_NODE):
            rank = index * RANKS_PER_NODE + local
            procs[rank] = subprocess.Popen(
                ["docker", "exec", "-e", f"RANK={rank}", "-e", f"LOCAL_RANK={local}", "-e", f"WORLD_SIZE={WORLD}",
                 "-e", f"RANKLOG_JOB={JOB}", "-e", f"FAIL_RANK={FAIL_RANK}", node.container_id,
                 "/opt/ranklog/bin/ranklog", "run", "--log-dir", "/var/log/ranklog", "--",
                 "python3", "/tmp/failing_rank.py"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return {rank: proc.wait(timeout=120) for rank, proc in procs.items()}


def _query(archive_url: str, token_file: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(ranklog_cmd("query", "--archive", archive_url, "--token-file", str(token_file), *args),
                          capture_output=True, text=True, timeout=120)


def test_job_exit_statuses_pass_through_ranklog_run(failed_job) -> None:
    assert failed_job == {rank: (1 if rank == FAIL_RANK else 134) for rank in range(WORLD)}


def test_every_rank_reaches_the_archive(failed_job, archive_url, token_file) -> None:
    def records():
        proc = _query(archive_url, token_file, "--job", JOB, "--format", "ndjson", "--limit", "1000")
        rows = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()] if proc.returncode == 0 else []
        ranks = {row["rank"] for row in rows}
        failures = [row for row in rows if "Watchdog caught collective operation timeout" in (row["msg"] or "")]
        ooms = [row for row in rows if "CUDA out of memory" in (row["msg"] or "") + (row.get("exc") or "")]
        return rows if ranks == set(range(WORLD)) and len(failures) == WORLD - 1 and len(ooms) == 2 else None

    rows = _poll("all 6 ranks' records in the archive", records, timeout=120)
    assert {row["host"] for row in rows} == set(TRAINING_NODES)
    assert {row["host"] for row in rows if row["rank"] == FAIL_RANK} == {"node2"}


def test_triage_names_the_failing_rank(failed_job, archive_url, token_file) -> None:
    _poll("records of the failing rank", lambda: _query(archive_url, token_file, "--job", JOB, "--rank",
                                                        str(FAIL_RANK), "--count").stdout.strip() not in ("", "0"),
          timeout=120)
    proc = subprocess.run(ranklog_cmd("triage", "--archive", archive_url, "--token-file", str(token_file),
                                      "--job", JOB, "--json"), capture_output=True, text=True, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    verdict = json.loads(proc.stdout)["verdict"]
    assert verdict["ranks"] == [FAIL_RANK], verdict
    assert verdict["signature"] == "cuda_oom"
    assert verdict["hosts"] == ["node2"]


def test_every_prometheus_target_is_up(cluster: Cluster, converged) -> None:
    url = f"http://{cluster.ip(MONITORING_HOST)}:9090/api/v1/targets"

    def all_up():
        targets = httpx.get(url, timeout=5).json()["data"]["activeTargets"]
        jobs = sorted(t["labels"]["job"] for t in targets)
        healthy = all(t["health"] == "up" for t in targets)
        return jobs if healthy and jobs.count("ranklog-agent") == len(TRAINING_NODES) else None

    jobs = _poll("every Prometheus target up", all_up, timeout=90)
    assert set(jobs) == {"prometheus", "ranklog-agent", "ranklog-archive", "alertmanager"}


def test_oom_alert_fires_and_reaches_the_webhook(cluster: Cluster, failed_job) -> None:
    prometheus = f"http://{cluster.ip(MONITORING_HOST)}:9090/api/v1/alerts"

    def firing():
        alerts = httpx.get(prometheus, timeout=5).json()["data"]["alerts"]
        return [a for a in alerts if a["labels"].get("alertname") == "RanklogCudaOutOfMemory"
                and a["state"] == "firing"]

    alerts = _poll("RanklogCudaOutOfMemory firing in Prometheus", firing, timeout=150)
    assert {a["labels"]["rank"] for a in alerts} == {str(FAIL_RANK)}

    def delivered():
        payloads = [json.loads(line) for line in docker("logs", cluster.webhook_id).splitlines() if line.startswith("{")]
        return [alert for payload in payloads for alert in payload.get("alerts", [])
                if alert["labels"].get("alertname") == "RanklogCudaOutOfMemory"]

    received = _poll("the alert at the webhook receiver", delivered, timeout=90)
    assert received[0]["status"] == "firing"
    assert received[0]["labels"]["rank"] == str(FAIL_RANK) and received[0]["labels"]["training_job"] == JOB


def test_one_verdict_reaches_the_webhook_with_a_working_report_link(cluster: Cluster, failed_job) -> None:
    def verdicts():
        payloads = [json.loads(line) for line in docker("logs", cluster.webhook_id).splitlines() if line.startswith("{")]
        return [p for p in payloads if p.get("kind") in ("verdict", "update") and p.get("training_job") == JOB]

    found = _poll("the archive's verdict at the webhook receiver", verdicts, timeout=150)
    time.sleep(5)  # the other ranks' alerts and suspects have arrived too: still one page
    pages = [p for p in verdicts() if p["kind"] == "verdict"]
    assert len(pages) == 1, verdicts()
    page = found[0]
    assert (page["ranks"], page["hosts"], page["category"]) == ([FAIL_RANK], ["node2"], "CUDA OOM"), page
    report = httpx.get(page["report_url"], timeout=10)
    assert report.status_code == 200 and "CUDA OOM" in report.text

