"""Grafana 11/12 and Logs Drilldown against a live archive, request by request as they send them.

Grafana's server cannot be installed here, so its requests are replayed from its source (read with the
``search``/``fetch`` tools; paths below are in the grafana/grafana and grafana/logs-drilldown repos):

- *Save & test*: ``pkg/tsdb/loki/healthcheck.go`` runs the instant query ``vector(1)+vector(1)`` over
  [1 s, 4 s]; ``pkg/tsdb/loki/api.go`` (``makeDataRequest``) sends it as ``GET /loki/api/v1/query``
  with ``direction`` and ``time`` = the range's end in ns, and expects one sample of value 2.
- Data queries (``makeDataRequest``): ``query_range`` with ``query``, ``direction``, ``limit`` (the
  panel's max lines; ``DEFAULT_MAX_LINES = 1000`` in ``public/app/plugins/datasource/loki/datasource.ts``),
  ``start``/``end`` in ns and ``step`` as ``<n>ms``, with ``X-Loki-Response-Encoding-Flags:
  categorize-labels`` (``requestStructuredMetadata``) and ``X-Query-Tags: Source=…`` for supporting
  queries. Resource calls (``makeRawRequest``) pass the query string through, without those headers.
- Explore (``datasource.ts``, ``LanguageProvider.ts``): ``labels`` and ``label/<name>/values`` with
  ns times, ``index/stats`` for the query-size estimate (``getQueryStats``), the logs query, the
  logs-volume histogram ``sum by (level, detected_level) (count_over_time(<expr> | drop __error__[$__auto]))``
  (``getSupplementaryQuery``), a log-details "filter for value" on a structured-metadata field
  (``toggleQueryFilter``: a label filter after the selector), ``detected_fields`` / ``detected_field/<n>/values``
  with ``limit`` 1000 (``fetchDetectedFields``), and a dashboard panel with ``unwrap``.
- Logs Drilldown's landing page (``src/services/datasource.ts``, ``ServiceSelectionScene.tsx``,
  ``ServiceSelectionTabsScene.tsx``): ``drilldown-limits``, ``detected_labels`` with an empty query,
  ``index/volume`` of ``{service_name=~".+"}`` with ``limit`` 5000 and ISO times, then per service
  ``sum by (detected_level) (count_over_time({ service_name="…" } [$__auto]))`` and a 100-line logs
  panel ``{service_name=`…` }``; a service's page (``ServiceScene.tsx``, ``src/services/variables.ts``):
  ``patterns``, ``detected_labels``, ``detected_fields`` of ``{service_name="…"} | json | logfmt |
  drop __error__, __error_details__``, field values, a level filter, a field filter after the parsers
  and a pattern filter ``|> "…"``.

The workload is :mod:`tests.helpers.grafana_workload` (two ranks of a real process logging through
ranklog's logger) shipped by a real agent to a real archive. Every answer is validated against
``loki_schema.json`` (written from Loki's API reference) and compared with what ``ranklog query`` —
a separate process — reads from the same archive.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import subprocess
import time
from collections import Counter
from pathlib import Path

import httpx
import jsonschema
import pytest

from tests.helpers.agent_proc import running_agent
from tests.helpers.archive_proc import running_archive
from tests.helpers.grafana_workload import JOB, RANKS, STEPS, run_workload
from tests.helpers.procs import ranklog_cmd

pytestmark = pytest.mark.slow
SCHEMA = json.loads((Path(__file__).with_name("loki_schema.json")).read_text())
GRAFANA = {"X-Loki-Response-Encoding-Flags": "categorize-labels"}
DRILLDOWN = {**GRAFANA, "X-Query-Tags": "Source=grafana-lokiexplore-app"}
PARSERS = "| json  | logfmt | drop __error__, __error_details__"  # variables.ts: the mixed parser segment
LOGFMT = re.compile(r"event=rollout batch=(\d+) latency=(\d+)ms tokens=(\d+) size=(\d+)KB")


def check(body: object, shape: str) -> None:
    jsonschema.validate(body, {**SCHEMA, "$ref": f"#/$defs/{shape}"})


def cli(root: Path, *flags: str) -> list[dict]:
    proc = subprocess.run(ranklog_cmd("query", "--archive", str(root), "--since", "2h", "--format", "ndjson",
                                      "--columns", "ts,level,msg,exc,rank,job,step,attrs", *flags),
                          capture_output=True, text=True, timeout=120, check=True)
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    for row in rows:
        row["line"] = row["msg"] + ("\n" + row["exc"] if row.get("exc") else "")
        row["fields"] = row["attrs"] if isinstance(row.get("attrs"), dict) else json.loads(row.get("attrs") or "{}")
    return rows


class Grafana:
    """Requests as the Grafana backend proxies them (see the module docstring)."""

    def __init__(self, client: httpx.Client, start_ns: int, end_ns: int) -> None:
        self.client, self.start_ns, self.end_ns = client, start_ns, end_ns

    @staticmethod
    def iso(ns: int) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 10**9)) + f".{ns // 10**6 % 1000:03d}Z"

    def data(self, expr: str, step_ms: int = 2000, limit: int | None = 1000, headers: dict | None = None,
             shape: str = "queryRange") -> dict:
        params = {"query": expr, "direction": "backward", "start": self.start_ns, "end": self.end_ns,
                  "step": f"{step_ms}ms"}
        if limit:
            params["limit"] = limit
        answer = self.client.get("/loki/api/v1/query_range", params=params, headers=headers or GRAFANA)
        assert answer.status_code == 200, (expr, answer.text)
        body = answer.json()
        check(body, shape)
        return body["data"]

    def instant(self, expr: str) -> dict:
        """An instant panel (``makeDataRequest``, QueryTypeInstant): time = the range's end."""
        answer = self.client.get("/loki/api/v1/query", params={"query": expr, "direction": "backward",
                                                                "time": self.end_ns}, headers=GRAFANA)
        assert answer.status_code == 200, (expr, answer.text)
        body = answer.json()
        check(body, "query")
        return body["data"]

    def resource(self, path: str, shape: str, iso: bool = False, **params) -> dict:
        times = {"start": self.iso(self.start_ns), "end": self.iso(self.end_ns)} if iso else \
            {"start": self.start_ns, "end": self.end_ns}
        answer = self.client.get(f"/loki/api/v1/{path}", params={**times, **params})
        assert answer.status_code == 200, (path, answer.text)
        body = answer.json()
        check(body, shape)
        return body


def entries(data: dict) -> list[tuple[int, str, dict, dict]]:
    """(ts, line, stream labels, structured metadata + parsed) of a streams answer, newest first."""
    out = [(int(ts), line, stream["stream"], {**extra.get("structuredMetadata", {}), **extra.get("parsed", {})})
           for stream in data["result"] for ts, line, extra in stream["values"]]
    return sorted(out, key=lambda item: -item[0])


def totals(data: dict, label: str) -> dict[str, int]:
    out: Counter[str] = Counter()
    for series in data["result"]:
        out[series["metric"].get(label, "")] += sum(int(float(v)) for _, v in series["values"])
    return dict(out)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grafana-replay")
    token = secrets.token_hex(16)
    tokens = tmp / "tokens"
    tokens.write_text(token + "\n")
    logs = tmp / "logs"
    started_ns = (time.time_ns() // 10**9 - 60) * 10**9  # whole seconds, as Grafana aligns a range to its step
    with running_archive(tmp / "archive", tokens, extra_args=["--flush-interval", "200ms"]) as archive, \
            running_agent([archive.url], tokens, tmp / "agent", sources=[f"{logs}/*/*/*.jsonl:ranklog"]):
        run_workload(logs)
        expected = RANKS * (STEPS + STEPS // 3 + STEPS // 5 + STEPS // 17) + 1
        deadline = time.monotonic() + 90
        while len(cli(archive.root, "--job", JOB)) < expected:
            assert time.monotonic() < deadline, "the workload never reached the archive"
            time.sleep(0.5)
        basic = base64.b64encode(f"grafana:{token}".encode()).decode()  # the datasource's basic-auth setting
        with httpx.Client(base_url=archive.url, timeout=120, headers={"Authorization": f"Basic {basic}"}) as client:
            yield archive, Grafana(client, started_ns, (time.time_ns() // 10**9 + 60) * 10**9)


def test_save_and_test(live):
    archive, grafana = live
    answer = grafana.client.get("/loki/api/v1/query", params={"query": "vector(1)+vector(1)", "direction": "backward",
                                                               "time": 4 * 10**9}, headers=GRAFANA)
    assert answer.status_code == 200
    body = answer.json()
    check(body, "query")
    (sample,) = body["data"]["result"]
    assert sample == {"metric": {}, "value": [4, "2"]}  # one frame, two fields, one row, value 2
    info = grafana.client.get("/loki/api/v1/status/buildinfo").json()
    check(info, "buildinfo")
    denied = httpx.get(f"{archive.url}/loki/api/v1/query", params={"query": "vector(1)+vector(1)"},
                       auth=("grafana", "not-the-token"), timeout=30)
    assert denied.status_code == 401


def test_explore_logs_volume_details_and_a_panel_with_unwrap(live):
    archive, grafana = live
    rows = cli(archive.root, "--job", JOB)
    labels = grafana.resource("labels", "labels_list")["data"]
    assert {"job", "host", "rank", "level", "format", "service_name"} <= set(labels)
    assert grafana.resource("label/rank/values", "labels_list", query=f'{{job="{JOB}"}}')["data"] == ["0", "1"]
    stats = grafana.client.get("/loki/api/v1/index/stats", params={
        "query": f'{{job="{JOB}"}}', "start": grafana.start_ns, "end": grafana.end_ns}).json()
    check(stats, "index_stats")
    assert stats["entries"] == len(rows)

    expr = f'{{job="{JOB}"}} |= "step done"'
    logs = entries(grafana.data(expr))
    want = sorted((r for r in rows if "step done" in r["msg"]), key=lambda r: r["ts"], reverse=True)
    assert [line for _, line, _, _ in logs] == [r["line"] for r in want]
    (_, _, stream, metadata) = logs[0]
    assert stream["job"] == JOB and stream["service_name"] == JOB and "step" not in stream
    assert {"step", "loss", "grad_norm", "step_time", "detected_level"} <= set(metadata)

    volume = grafana.data(f"sum by (level, detected_level) (count_over_time({expr} | drop __error__[2s]))",
                          headers={**GRAFANA, "X-Query-Tags": "Source=logvolhist"}, limit=None)
    assert totals(volume, "level") == dict(Counter(r["level"] for r in want))

    # log details, "filter for value" on a structured-metadata field: a label filter after the selector
    picked = entries(grafana.data(f'{expr} | step=`17`'))
    assert [line for _, line, _, _ in picked] == [r["line"] for r in want if r["step"] == 17]
    # | json on these lines: the eval payloads' "step" is parsed (those records carry no step of their own),
    # the others fail to parse (kept, __error__) and their structured-metadata step is compared
    over = entries(grafana.data(f'{{job="{JOB}"}} | json | step > 50'))
    step_of = {id(r): r["step"] if r["step"] is not None else
               json.loads(r["msg"]).get("step", -1) if r["msg"].startswith("{") else -1 for r in rows}
    assert sorted(line for _, line, _, _ in over) == sorted(r["line"] for r in rows if step_of[id(r)] > 50)

    fields = grafana.resource("detected_fields", "detected_fields", query=f'{{job="{JOB}"}}', limit=1000)
    kinds = {f["label"]: (f["type"], f["parsers"]) for f in fields["fields"]}
    assert kinds["loss"] == ("float", None) and kinds["step_time"] == ("duration", None)
    assert kinds["tokens"] == ("int", ["logfmt"]) and kinds["latency"] == ("duration", ["logfmt"])
    assert kinds["accuracy"] == ("float", ["json"])
    values = grafana.resource("detected_field/split/values", "detected_field_values", query=f'{{job="{JOB}"}}')
    assert values["values"] == ["gsm8k"]

    # a dashboard panel: avg_over_time(… | unwrap loss [$__interval]) by (rank), step = interval
    step_s = 30
    panel = grafana.data(f'avg_over_time({{job="{JOB}"}} | unwrap loss [{step_s}s]) by (rank)', step_ms=step_s * 1000,
                         limit=None)
    for series in panel["result"]:
        rank = int(series["metric"]["rank"])
        for t, value in series["values"]:
            t_ns = round(t * 1e9)
            window = [r["fields"]["loss"] for r in rows if r["rank"] == rank and "loss" in r["fields"]
                      and t_ns - step_s * 10**9 < _ns(r["ts"]) <= t_ns]
            assert float(value) == pytest.approx(sum(window) / len(window))
    assert {s["metric"]["rank"] for s in panel["result"]} == {"0", "1"}
    tokens = grafana.instant(f'sum by (rank) (sum_over_time({{job="{JOB}"}} |= "event=rollout" | logfmt '
                             '| unwrap tokens [10m]))')
    per_rank: Counter[str] = Counter()
    for r in rows:
        if (match := LOGFMT.search(r["msg"])):
            per_rank[str(r["rank"])] += int(match.group(3))
    assert {s["metric"]["rank"]: float(s["value"][1]) for s in tokens["result"]} == per_rank
    slow = grafana.instant(f'sum(count_over_time({{job="{JOB}"}} | logfmt | latency > 500ms [10m]))')
    assert float(slow["result"][0]["value"][1]) == sum(
        1 for r in rows if (m := LOGFMT.search(r["msg"])) and int(m.group(2)) > 500)


def _ns(ts: str) -> int:
    from ranklog.record import parse_ts

    value = parse_ts(ts)
    assert value is not None
    return value


def test_logs_drilldown_landing_page_and_service(live):
    archive, grafana = live
    rows = cli(archive.root, "--job", JOB)
    limits = grafana.client.get("/loki/api/v1/drilldown-limits").json()
    check(limits, "drilldown_limits")
    detected = grafana.resource("detected_labels", "detected_labels", iso=True, query="")
    cardinality = {item["label"]: item["cardinality"] for item in detected["detectedLabels"]}
    assert cardinality["rank"] == RANKS and cardinality["service_name"] == 1 and cardinality["job"] == 1
    volume = grafana.resource("index/volume", "query", iso=True, query='{service_name=~".+"}', limit=5000)
    (service,) = volume["data"]["result"]
    assert service["metric"] == {"service_name": JOB}
    assert int(service["value"][1]) == sum(len(r["line"].encode()) for r in rows)
    per_level = grafana.data(f'sum by (detected_level) (count_over_time({{ service_name="{JOB}"}} [15s]))',
                             step_ms=15000, limit=None, headers=DRILLDOWN)
    spelled = {"INFO": "info", "WARNING": "warn", "ERROR": "error"}
    assert totals(per_level, "detected_level") == dict(Counter(spelled[r["level"]] for r in rows))
    panel = entries(grafana.data(f"{{service_name=`{JOB}` }}", limit=100, headers=DRILLDOWN))
    newest = sorted(rows, key=lambda r: r["ts"], reverse=True)[:100]
    assert [line for _, line, _, _ in panel] == [r["line"] for r in newest]

    # the service's page
    found = grafana.resource("patterns", "patterns", iso=True, query=f'{{service_name="{JOB}"}}', step="15s")["data"]
    assert sum(count for p in found for _, count in p["samples"]) == len(rows)
    steps = next(p for p in found if p["pattern"].startswith("step done"))
    picked = entries(grafana.data(f'{{service_name="{JOB}"}} |> "{steps["pattern"]}"', headers=DRILLDOWN))
    assert len(picked) == sum(1 for r in rows if r["msg"] == "step done")
    labels = grafana.resource("detected_labels", "detected_labels", iso=True, query=f'{{service_name="{JOB}"}}')
    assert {item["label"] for item in labels["detectedLabels"]} >= {"host", "job", "level", "rank", "service_name"}
    mixed = f'{{service_name="{JOB}"}}     {PARSERS}  '
    fields = grafana.resource("detected_fields", "detected_fields", iso=True, query=mixed)
    assert {"loss", "step", "tokens", "accuracy", "detected_level"} <= {f["label"] for f in fields["fields"]}
    batches = grafana.resource("detected_field/batch/values", "detected_field_values", iso=True, query=mixed)
    assert sorted(batches["values"], key=int) == sorted({m.group(1) for r in rows if (m := LOGFMT.search(r["msg"]))},
                                                        key=int)
    errors = entries(grafana.data(f'{{service_name="{JOB}"}} | detected_level=~"error|warn" {PARSERS}',
                                  headers=DRILLDOWN))
    assert sorted(line for _, line, _, _ in errors) == sorted(r["line"] for r in rows if r["level"] in ("ERROR", "WARNING"))
    big = entries(grafana.data(f"{mixed} | size > 32KB", headers=DRILLDOWN))
    assert sorted(line for _, line, _, _ in big) == sorted(
        r["line"] for r in rows if (m := LOGFMT.search(r["msg"])) and int(m.group(4)) * 1000 > 32_000)
