"""Every generated LogQL query (log panels, the log-volume panel, the triage annotation, the data links
to Explore) against a live archive fed by a live agent reading the scripted failing job — the way
``test_live.py`` proves the PromQL panels against a live Prometheus.

The workload is :class:`tests.dashboards.scenario.FailingJob`; ``ranklog triage --annotate`` (a real
process) posts its verdict. Each query is sent as Grafana sends it (the dashboard variables replaced
the way Grafana formats them: "All" is ``.*``, a multi-value selection ``(0|3)``) and must return
exactly the expected records, compared with ``ranklog query`` over the same archive.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import time
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import httpx
import pytest

from dashboards.queries import dashboard_queries
from tests.dashboards.scenario import FAILING_RANK, HOST, JOB, RANKS, FailingJob
from tests.helpers.agent_proc import running_agent
from tests.helpers.archive_proc import running_archive
from tests.helpers.procs import ranklog_cmd

pytestmark = pytest.mark.slow
GRAFANA = {"$__interval": "15s", "$__auto": "15s"}


def substitute(expr: str, values: dict[str, str]) -> str:
    for name in sorted({**GRAFANA, **values}, key=len, reverse=True):
        expr = expr.replace(name, {**GRAFANA, **values}[name])
    return expr


def cli(archive_root: Path, *flags: str) -> list[dict]:
    proc = subprocess.run(ranklog_cmd("query", "--archive", str(archive_root), "--since", "1h", "--format", "ndjson",
                                      *flags), capture_output=True, text=True, timeout=120, check=True)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("logs-live")
    token = tmp / "tokens"
    token.write_text(secrets.token_hex(16) + "\n")
    job = FailingJob(tmp / "logs", tick=0.3)
    with running_archive(tmp / "archive", token, extra_args=["--flush-interval", "200ms"]) as archive, \
            running_agent([archive.url], token, tmp / "agent", sources=[f"{tmp / 'logs'}/*.log:ranklog"],
                          extra_args=["--host", HOST]):
        job.start()
        try:
            time.sleep(2)
            job.fail()
            time.sleep(1)
        finally:
            job.stop()
        client = httpx.Client(base_url=f"{archive.url}/loki/api/v1", headers=archive.headers(), timeout=60)
        expected_errors = 12 + 1 + (RANKS - 1)
        deadline = time.monotonic() + 60
        while len(cli(archive.root, "--job", JOB, "--level", "ERROR")) < expected_errors:
            assert time.monotonic() < deadline, "the failing job's errors never reached the archive"
            time.sleep(0.5)
        settled, seen = time.monotonic(), -1
        while time.monotonic() - settled < 2:  # the agent has shipped everything the job wrote
            count = len(cli(archive.root, "--job", JOB))
            if count != seen:
                settled, seen = time.monotonic(), count
            time.sleep(0.5)
        triage = subprocess.run(ranklog_cmd("triage", "--archive", str(archive.root), "--job", JOB, "--annotate",
                                            archive.url, "--token-file", str(token)),
                                capture_output=True, text=True, timeout=180)
        assert triage.returncode == 1, triage.stderr  # the failure found
        yield archive, client
        client.close()


def query_range(client: httpx.Client, expr: str, **params) -> dict:
    now = time.time_ns()
    response = client.get("/query_range", params={"query": expr, "start": now - 3600 * 10**9, "end": now,
                                                  "limit": 1000, **params})
    assert response.status_code == 200, (expr, response.text)
    return response.json()["data"]


def lines(data: dict) -> list[tuple[int, str, dict]]:
    return sorted(((int(ts), line, s["stream"]) for s in data["result"] for ts, line in s["values"]),
                  key=lambda item: item[0])


def test_every_generated_logs_query_returns_the_expected_records(live):
    archive, client = live
    queries = list(dashboard_queries(kind="loki"))
    assert {q.where for q in queries} == {
        "training.json: panel 'Log records by level (archive)' A",
        "training.json: panel 'Errors of the selected jobs and ranks' A",
        "training.json: annotation 'Triage verdicts'"}
    # "All" is `.*`, which (as in Loki) also matches records without the label: the agent's record of
    # the job's malformed line has no job, so "All" is compared with every record of the archive
    everything = cli(archive.root)
    assert any(r.get("job") is None for r in everything)
    for selection in ({"$training_job": ".*", "$rank": ".*"}, {"$training_job": JOB, "$rank": f"(0|{FAILING_RANK})"}):
        ranks = None if selection["$rank"] == ".*" else {0, FAILING_RANK}
        job = None if selection["$training_job"] == ".*" else JOB
        chosen = lambda rows, ranks=ranks, job=job: [  # noqa: E731
            r for r in rows if (ranks is None or r.get("rank") in ranks) and (job is None or r.get("job") == job)]

        for query in queries:
            expr = substitute(query.expr, selection)
            if "Errors" in query.where:
                got = lines(query_range(client, expr))
                want = chosen([r for r in everything if r["level"] in ("ERROR", "CRITICAL")])
                assert sorted(line for _, line, _ in got) == sorted(
                    r["msg"] + ("\n" + r["exc"] if r.get("exc") else "") for r in want)
                assert any("CUDA out of memory" in line for _, line, _ in got)
            elif "Log records by level" in query.where:
                data = query_range(client, expr, step="15s")
                assert data["resultType"] == "matrix"
                counted = {s["metric"]["level"]: sum(int(v) for _, v in s["values"]) for s in data["result"]}
                want: dict[str, int] = {}
                for row in chosen(everything):
                    want[row["level"]] = want.get(row["level"], 0) + 1
                assert counted == want
            else:  # the triage annotation
                (verdict,) = lines(query_range(client, expr))
                assert verdict[1].startswith("triage: ") and f"rank {FAILING_RANK}" in verdict[1]
                assert verdict[2]["rank"] == str(FAILING_RANK) and verdict[2]["job"] == JOB
                assert verdict[2]["level"] == "CRITICAL" and verdict[2]["format"] == "triage"


def test_triage_annotation_is_posted_once(live):
    archive, client = live
    again = subprocess.run(ranklog_cmd("triage", "--archive", str(archive.root), "--job", JOB, "--annotate", archive.url,
                                       "--token-file", str(archive.token_file)),
                           capture_output=True, text=True, timeout=180)
    assert again.returncode == 1, again.stderr
    time.sleep(1)
    assert len(lines(query_range(client, '{format="triage"}'))) == 1


def test_data_links_open_the_rank_logs_in_explore(live, generated_dashboards):
    """A per-rank panel's link, with the series' labels and the panel's range filled in as Grafana does,
    opens Explore on a query that returns exactly that rank's records."""
    archive, client = live
    training = generated_dashboards["training"]
    (link,) = next(p for p in training["panels"] if p["title"] == "Step per rank")["fieldConfig"]["defaults"]["links"]
    now_ms = time.time_ns() // 10**6
    filled = (link["url"].replace("${__field.labels.training_job:percentencode}", JOB)
              .replace("${__field.labels.rank:percentencode}", str(FAILING_RANK))
              .replace("${logs:percentencode}", "ranklog-archive")
              .replace("${__from}", str(now_ms - 3600 * 1000)).replace("${__to}", str(now_ms)))
    (pane,) = json.loads(unquote(parse_qs(urlsplit(filled).query)["panes"][0])).values()
    query = pane["queries"][0]
    data = query_range(client, query["expr"], start=f"{int(pane['range']['from']) / 1000:.3f}",
                       end=f"{int(pane['range']['to']) / 1000:.3f}")
    got = lines(data)
    want = cli(archive.root, "--job", JOB, "--rank", str(FAILING_RANK))
    assert len(got) == len(want) > 10
    assert {labels["rank"] for _, _, labels in got} == {str(FAILING_RANK)}

