"""The archive's Loki read API: LogQL over the query engine, Loki's parameters, shapes and errors.

The reference answers are computed here from the corpus table itself (numpy/pyarrow over the rows
the test wrote), never from the Loki code's own helpers.

The archive is written through the archive's own writer (tests.helpers.query_data), then served by
the archive's routes in-process (Starlette's TestClient: real HTTP semantics, no socket). Answers
are compared with the engine (``ranklog query``'s path) and, for the Grafana panel shape, with the
``ranklog query`` CLI as a real process. Every response is validated against ``loki_schema.json``,
written from Loki's HTTP API reference.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import jsonschema
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.testclient import TestClient

from ranklog.archive.loki.routes import LokiAPI
from ranklog.query import engine
from ranklog.query.filters import QuerySpec
from ranklog.query.sources import open_source
from ranklog.record import arrow_schema, ts_array, ts_ns
from tests.helpers.corpus import generate
from tests.helpers.procs import ranklog_cmd
from tests.helpers.query_data import write_archive

SCHEMA = json.loads((Path(__file__).with_name("loki_schema.json")).read_text())
TOKEN = "loki-test-token"
JOB = "ppo-qwen7b-gsm8k"
NOW_NS = time.time_ns() // 1000 * 1000  # whole microseconds: the archive stores ts in µs
START_NS = NOW_NS - 50 * 60 * 10**9  # the corpus spans the last ~50 minutes: inside every default range


def check_shape(body: object, shape: str) -> None:
    jsonschema.validate(body, {**SCHEMA, "$ref": f"#/$defs/{shape}"})


@pytest.fixture(scope="module")
def corpus() -> pa.Table:
    table = generate(3000, start_ns=START_NS, span_s=45 * 60, hosts=2, ranks_per_host=4, seed=11)
    extra = {name: [None] for name in arrow_schema().names}
    extra.update(ts=ts_array([NOW_NS - 5 * 60 * 10**9]), level=["ERROR"], msg=["RuntimeError: CUDA error: device-side assert"],
                 exc=["Traceback (most recent call last):\n  File \"train.py\", line 3\nRuntimeError: boom"],
                 host=["gpu-node-000"], ip=["10.0.0.1"], rank=[3], local_rank=[3], job=[JOB], role=["trainer"],
                 source=["/x"], source_id=["hand:1"], offset=[0], format=["python"], trace_id=["feedbeef"])
    return pa.concat_tables([table.cast(arrow_schema()), pa.table(extra, schema=arrow_schema())])


@pytest.fixture(scope="module")
def root(corpus, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("loki") / "archive"
    write_archive(corpus, path, files_per_hour=2)
    return path


@pytest.fixture(scope="module")
def client(root) -> TestClient:
    def authorize(request):
        if request.headers.get("authorization") == f"Bearer {TOKEN}":
            return None
        return JSONResponse({"error": "missing or invalid bearer token"}, status_code=401)

    app = Starlette(routes=LokiAPI(lambda _: str(root), authorize).routes())
    with TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"}) as test_client:
        yield test_client


def get(client: TestClient, path: str, **params) -> dict:
    response = client.get(f"/loki/api/v1/{path}", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def entries(body: dict) -> list[tuple[int, str, dict]]:
    return [(int(ts), line, stream["stream"]) for stream in body["data"]["result"] for ts, line in stream["values"]]


def reference(root: Path, spec: QuerySpec) -> pa.Table:
    return engine.read(open_source(archive=str(root)), spec)


def test_log_query_matches_the_engine_and_orders_by_direction(client, root):
    spec = QuerySpec(start_ns=START_NS, end_ns=NOW_NS, ranks=(3,), levels=("ERROR", "CRITICAL"), jobs=(JOB,))
    expected = reference(root, spec)
    assert expected.num_rows > 5
    query = f'{{job="{JOB}", rank="3", level=~"ERROR|CRITICAL"}}'
    for direction in ("backward", "forward"):
        body = get(client, "query_range", query=query, start=START_NS, end=NOW_NS, limit=5000, direction=direction)
        check_shape(body, "queryRange")
        assert body["data"]["resultType"] == "streams"
        got = entries(body)
        assert len(got) == expected.num_rows
        times = sorted(t for t, _, _ in got)
        expected_ns = sorted(ts_ns(expected["ts"]).tolist())
        assert times == expected_ns
        for _, _, labels in got:
            assert labels["job"] == JOB and labels["rank"] == "3" and labels["level"] in ("ERROR", "CRITICAL")
        per_stream = [[int(ts) for ts, _ in stream["values"]] for stream in body["data"]["result"]]
        for values in per_stream:
            assert values == sorted(values, reverse=direction == "backward")
    # limit keeps the newest (backward) or the oldest (forward) entries
    newest = entries(get(client, "query_range", query=query, start=START_NS, end=NOW_NS, limit=3))
    oldest = entries(get(client, "query_range", query=query, start=START_NS, end=NOW_NS, limit=3, direction="FORWARD"))
    assert sorted(t for t, _, _ in newest) == expected_ns[-3:]
    assert sorted(t for t, _, _ in oldest) == expected_ns[:3]


STREAM = {"job": JOB, "service_name": JOB, "host": "gpu-node-000", "rank": "3", "level": "ERROR", "format": "python"}
METADATA = {"local_rank": "3", "role": "trainer", "trace_id": "feedbeef", "detected_level": "error", "source": "/x"}


def test_line_filters_chain_and_lines_carry_the_traceback(client, root):
    body = get(client, "query_range", query='{rank="3"} |= "CUDA error" != "nothing-like-this" |~ "device-.*assert"',
               start=START_NS, end=NOW_NS)
    got = entries(body)
    assert len(got) == 1
    _, line, labels = got[0]
    assert line.startswith("RuntimeError: CUDA error: device-side assert\nTraceback (most recent call last)")
    # without categorize-labels, structured metadata is folded into the stream labels (Loki's default)
    assert labels == {**STREAM, **METADATA}
    # a filter on the traceback text finds the record (the line includes it), a negative one drops it
    assert len(entries(get(client, "query_range", query='{trace_id="feedbeef"} |= "RuntimeError: boom"'))) == 1
    assert entries(get(client, "query_range", query='{trace_id="feedbeef"} != "boom"')) == []
    assert len(entries(get(client, "query_range", query='{trace_id="feedbeef"} |= "nope" or "boom"'))) == 1
    # json / logfmt fail on this plain line (kept, with __error__), drop removes the error labels
    (parsed,) = [labels for _, _, labels in entries(get(client, "query_range",
                                                          query='{trace_id="feedbeef"} | json | logfmt | drop __error__'))]
    assert "__error__" not in parsed and parsed["__error_details__"]


def test_structured_metadata_is_categorized_for_grafana(client):
    """Grafana 11/12 send ``X-Loki-Response-Encoding-Flags: categorize-labels`` (pkg/tsdb/loki/api.go,
    makeDataRequest): stream labels stay the stream's, metadata and parsed labels ride with each line."""
    response = client.get("/loki/api/v1/query_range", params={"query": '{trace_id="feedbeef"} | logfmt --keep-empty'},
                          headers={"X-Loki-Response-Encoding-Flags": "categorize-labels"})
    body = response.json()
    check_shape(body, "queryRange")
    assert body["data"]["encodingFlags"] == ["categorize-labels"]
    ((stream, ((_, _, extra),)),) = [(s["stream"], s["values"]) for s in body["data"]["result"]]
    assert stream == STREAM and extra["structuredMetadata"] == METADATA
    assert extra["parsed"]["RuntimeError:"] == "" and extra["parsed"]["CUDA"] == ""  # --keep-empty kept standalone keys


@pytest.mark.parametrize(("matcher", "column", "keep"), [
    ('host!="gpu-node-000"', "host", lambda v: v != "gpu-node-000"),
    ('rank=~"1|2"', "rank", lambda v: v in (1, 2)),
    ('rank!~"[0-5]"', "rank", lambda v: v not in range(6)),
    ('local_rank="2"', "local_rank", lambda v: v == 2),
    ('role=~"WorkerDict_0:[01]"', "role", lambda v: v in ("WorkerDict_0:0", "WorkerDict_0:1")),
    ('format!~"ranklog|ray"', "format", lambda v: v not in ("ranklog", "ray")),
    ('level="warning"', "level", lambda v: v == "WARNING"),
    ('trace_id=""', "trace_id", lambda v: v is None),
])
def test_every_label_and_operator(client, corpus, matcher, column, keep):
    expected = sum(1 for v in corpus[column].to_pylist() if keep(v))
    body = get(client, "query_range", query=f"{{{matcher}}}", start=START_NS, end=NOW_NS + 1, limit=5000)
    assert len(entries(body)) == expected


def test_metric_queries(client, corpus):
    step = 300
    end = START_NS + 3600 * 10**9
    query = f'sum by (level) (count_over_time({{job="{JOB}"}} [5m]))'
    body = get(client, "query_range", query=query, start=START_NS, end=end, step=step)
    check_shape(body, "queryRange")
    assert body["data"]["resultType"] == "matrix"
    totals = {s["metric"]["level"]: sum(int(v) for _, v in s["values"]) for s in body["data"]["result"]}
    # windows of 5m every 5m tile the range: every record is counted once
    levels = pc.value_counts(corpus.filter(pa.array(ts_ns(corpus["ts"]) > START_NS))["level"])
    assert totals == {item["values"]: item["counts"] for item in levels.to_pylist()}
    rate = get(client, "query_range", query=f'sum(rate({{job="{JOB}"}} [5m]))', start=START_NS, end=end, step=step)
    counts = get(client, "query_range", query=f'sum(count_over_time({{job="{JOB}"}} [5m]))', start=START_NS, end=end,
                 step=step)
    (rate_series,), (count_series,) = rate["data"]["result"], counts["data"]["result"]
    assert rate_series["metric"] == {}
    assert [float(v) * 300 for _, v in rate_series["values"]] == pytest.approx([float(v) for _, v in count_series["values"]])
    by_rank = get(client, "query_range", query=f'count by (host) (count_over_time({{job="{JOB}"}} [5m]))',
                  start=START_NS, end=end, step=step)
    assert {s["metric"]["host"] for s in by_rank["data"]["result"]} == {"gpu-node-000", "gpu-node-001"}
    assert max(int(v) for s in by_rank["data"]["result"] for _, v in s["values"]) > 1  # streams per host
    size = get(client, "query_range", query='sum(bytes_over_time({trace_id="feedbeef"} [1h]))', start=NOW_NS, end=NOW_NS,
               step=60)
    line = "RuntimeError: CUDA error: device-side assert\nTraceback (most recent call last):\n  File \"train.py\", line 3\nRuntimeError: boom"
    assert size["data"]["result"][0]["values"][0][1] == str(len(line.encode()))
    instant = get(client, "query", query=f'sum by (rank) (count_over_time({{job="{JOB}", rank="3"}} [2h]))', time=NOW_NS)
    check_shape(instant, "query")
    assert instant["data"]["resultType"] == "vector"
    assert instant["data"]["result"][0]["metric"] == {"rank": "3"}
    assert int(instant["data"]["result"][0]["value"][1]) == sum(1 for r in corpus["rank"].to_pylist() if r == 3)


def test_labels_values_series_and_stats(client, corpus):
    labels = get(client, "labels", start=START_NS, end=NOW_NS)
    check_shape(labels, "labels_list")
    assert labels["data"] == ["format", "host", "job", "level", "rank", "service_name"]
    ranks = get(client, "label/rank/values", start=START_NS, end=NOW_NS)
    check_shape(ranks, "labels_list")
    assert ranks["data"] == [str(r) for r in range(8)]
    assert get(client, "label/host/values", query='{rank="5"}')["data"] == ["gpu-node-001"]
    assert get(client, "label/nonexistent/values")["data"] == []
    assert get(client, "label/role/values", query='{trace_id="feedbeef"}')["data"] == ["trainer"]  # selector labels too
    series = get(client, "series", **{"match[]": '{trace_id="feedbeef"}'})
    check_shape(series, "series")
    assert series["data"] == [STREAM]
    posted = client.post("/loki/api/v1/series", data={"match[]": '{trace_id="feedbeef"}'})
    assert posted.json() == series
    stats = client.get("/loki/api/v1/index/stats", params={"query": f'{{job="{JOB}"}}', "start": START_NS,
                                                           "end": NOW_NS}).json()
    check_shape(stats, "index_stats")
    assert stats["entries"] == corpus.num_rows and stats["chunks"] >= 2 and stats["bytes"] > 0 and stats["streams"] > 8


def test_times_as_rfc3339_relative_and_seconds(client):
    query = '{trace_id="feedbeef"}'
    record_ns = NOW_NS - 5 * 60 * 10**9
    # relative times count from the query's now, which runs ahead of NOW_NS (set at import) as the
    # suite goes on: the window reaches 5 minutes past the record's age, however late this runs
    window_m = int((time.time_ns() - record_ns) / 60e9) + 5
    start_s = record_ns / 1e9 - 300
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start_s))
    for start in (iso, f"now-{window_m}m", f"{window_m}m", f"{start_s:.3f}"):
        assert len(entries(get(client, "query_range", query=query, start=start))) == 1, start
    assert entries(get(client, "query_range", query=query, start="now-1m")) == []
    assert len(entries(get(client, "query_range", query=query, since=f"{window_m}m"))) == 1


@pytest.mark.parametrize(("path", "params", "message"), [
    ("query_range", {"query": '{job="x"'}, "parse error at line 1, col 9: syntax error: unexpected end of input"),
    ("query_range", {"query": '{job="x"} | addr = ip("10.0.0.0/8")'}, "not supported by the ranklog archive: ip()"),
    ("query_range", {"query": 'approx_topk(3, count_over_time({job="x"}[1m]))'},
     "not supported by the ranklog archive: 'approx_topk'"),
    ("query_range", {"query": f'count_over_time({{job="{JOB}"}} | json [1h])', "start": START_NS},
     "pipeline error: 'JSONParserErr'"),
    ("index/volume", {"query": '{job="x"} |= "y"'}, "only label matchers are supported"),
    ("query_range", {"query": '{job=~"("}'}, "invalid regular expression"),
    ("query_range", {"query": '{job="x"}', "limit": "5001"}, "max entries limit per query exceeded"),
    ("query_range", {"query": '{job="x"}', "start": "yesterday-ish"}, 'invalid parameter "start"'),
    ("query_range", {"query": 'rate({job="x"}[1m])', "start": "0", "step": "1"}, "exceeded maximum resolution"),
    ("query", {"query": '{job="x"}'}, "log queries are not supported as an instant query type"),
    ("series", {}, 'at least one "match[]" selector is required'),
])
def test_errors_are_lokis(client, path, params, message):
    response = client.get(f"/loki/api/v1/{path}", params=params)
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("text/plain")
    assert message in response.text


def test_unknown_labels_and_auth(client):
    assert entries(get(client, "query_range", query='{service="x"}')) == []
    assert len(entries(get(client, "query_range", query='{service="", trace_id="feedbeef"}'))) == 1
    assert len(entries(get(client, "query_range", query=f'{{service_name="{JOB}", trace_id="feedbeef"}}'))) == 1
    denied = client.get("/loki/api/v1/labels", headers={"Authorization": "Bearer wrong"})
    assert denied.status_code == 401


def test_grafana_panel_query_matches_ranklog_query_cli(client, root):
    """The errors panel's query (job + rank + level) against `ranklog query` run as a process."""
    start_iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(START_NS // 10**9))
    proc = subprocess.run(ranklog_cmd("query", "--archive", str(root), "--job", JOB, "--rank", "3", "--level", "ERROR",
                                      "--start", start_iso, "--format", "ndjson", "--columns", "ts,msg,exc"),
                          capture_output=True, text=True, timeout=120, check=True)
    cli = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    body = get(client, "query_range", query=f'{{job="{JOB}", rank="3", level=~"ERROR|CRITICAL"}}',
               start=start_iso + "Z", limit=5000, direction="forward")
    lines = [line for _, line, _ in sorted(entries(body), key=lambda item: item[0])]
    assert lines == [r["msg"] + ("\n" + r["exc"] if r.get("exc") else "") for r in cli]
    assert len(lines) > 5


def test_tail_streams_new_records_over_a_websocket(client):
    from starlette.websockets import WebSocketDisconnect

    start = NOW_NS - 10 * 60 * 10**9
    with client.websocket_connect(f'/loki/api/v1/tail?query={{trace_id="feedbeef"}}&start={start}') as ws:
        message = ws.receive_json()
    check_shape(message, "tail")
    assert message["dropped_entries"] is None
    ((ts, line),) = message["streams"][0]["values"]
    assert int(ts) == NOW_NS - 5 * 60 * 10**9 and line.startswith("RuntimeError: CUDA error")
    with pytest.raises(WebSocketDisconnect), \
            client.websocket_connect("/loki/api/v1/tail?query={}", headers={"Authorization": "Bearer wrong"}) as ws:
        ws.receive_json()
    with pytest.raises(WebSocketDisconnect), client.websocket_connect("/loki/api/v1/tail?query={job=") as ws:
        ws.receive_json()


# -- the grammar on the corpus, against references computed from the rows ----------------------------------
STEP_S = 600


@pytest.fixture(scope="module")
def rows(corpus) -> list[dict]:
    out = corpus.to_pylist()
    for row, ns in zip(out, ts_ns(corpus["ts"]).tolist(), strict=True):
        row["ns"] = ns
        row["fields"] = json.loads(row["attrs"]) if row["attrs"] else {}
        row["line"] = row["msg"] + ("\n" + row["exc"] if row["exc"] else "")
    return out


def lines_of(client, query: str, **params) -> list[str]:
    body = get(client, "query_range", query=query, start=START_NS, end=NOW_NS + 1, limit=5000, **params)
    check_shape(body, "queryRange")
    return sorted(line for _, line, _ in entries(body))


def steps() -> list[int]:
    first = (START_NS // 10**9 // STEP_S + 1) * STEP_S * 10**9
    return list(range(first, NOW_NS, STEP_S * 10**9))


def series_of(body: dict) -> dict[tuple, dict[int, float]]:
    check_shape(body, "queryRange")
    return {tuple(sorted(s["metric"].items())): {int(t * 10**9): float(v) for t, v in s["values"]}
            for s in body["data"]["result"]}


def metric_range(client, query: str) -> dict[tuple, dict[int, float]]:
    marks = steps()
    return series_of(get(client, "query_range", query=query, start=marks[0], end=marks[-1], step=STEP_S))


def windows(rows: list[dict], keep, group, value, range_s: int = STEP_S) -> dict[tuple, dict[int, list[float]]]:
    """Per group and step, the values of the kept rows in Loki's window (t - range, t]."""
    out: dict[tuple, dict[int, list[float]]] = {}
    for t in steps():
        for row in rows:
            if t - range_s * 10**9 < row["ns"] <= t and keep(row):
                out.setdefault(group(row), {}).setdefault(t, []).append(value(row))
    return out


def test_health_check_buildinfo_and_drilldown_limits(client):
    """Grafana's health check (pkg/tsdb/loki/healthcheck.go): the instant query ``vector(1)+vector(1)``
    over [1 s, 4 s] (sent as time=4 s, pkg/tsdb/loki/api.go makeDataRequest) must give one sample, 2."""
    body = get(client, "query", query="vector(1)+vector(1)", time=4 * 10**9, direction="backward")
    check_shape(body, "query")
    assert body["data"]["resultType"] == "vector" and body["data"]["result"] == [{"metric": {}, "value": [4, "2"]}]
    scalar = get(client, "query", query="1 + 2 * 3 ^ 2", time=4 * 10**9)
    check_shape(scalar, "query")
    assert scalar["data"]["resultType"] == "scalar" and scalar["data"]["result"] == [4, "19"]
    info = client.get("/loki/api/v1/status/buildinfo").json()
    check_shape(info, "buildinfo")
    assert tuple(int(part) for part in info["version"].split(".")) >= (3, 6, 0)  # drilldown-limits is Loki 3.6's
    limits = client.get("/loki/api/v1/drilldown-limits").json()
    check_shape(limits, "drilldown_limits")
    assert limits["pattern_ingester_enabled"] and limits["limits"]["max_query_series"] == 500
    assert client.get("/loki/api/v1/status/buildinfo", headers={"Authorization": "Bearer wrong"}).status_code == 401


def test_label_filters_on_metadata_stream_labels_and_extracted_fields(client, rows):
    median_step = sorted(r["step"] for r in rows if r["step"] is not None)[len([r for r in rows if r["step"]]) // 2]
    took = re.compile(r"took ([0-9.]+)s for")
    cases = {
        f'{{job="{JOB}"}} | step > {median_step}': lambda r: r["step"] is not None and r["step"] > median_step,
        f'{{job="{JOB}"}} | json | step > {median_step}': lambda r: r["step"] is not None and r["step"] > median_step,
        f'{{job="{JOB}"}} | level="ERROR"': lambda r: r["level"] == "ERROR",
        f'{{job="{JOB}"}} | detected_level=~"error|critical"': lambda r: r["level"] in ("ERROR", "CRITICAL"),
        f'{{job="{JOB}"}} | logger="verl.workers.rollout.vllm" or rank="3"':
            lambda r: r["logger"] == "verl.workers.rollout.vllm" or r["rank"] == 3,
        f'{{job="{JOB}"}} | (rank >= 4 and rank < 6) or role="trainer"':
            lambda r: (r["rank"] is not None and 4 <= r["rank"] < 6) or r["role"] == "trainer",
        f'{{job="{JOB}"}} | kv_cache_usage > 0.5': lambda r: float(r["fields"].get("kv_cache_usage", -1)) > 0.5,
        f'{{job="{JOB}"}} | bytes >= 100MB': lambda r: r["fields"].get("bytes", -1) >= 100e6,
        f'{{job="{JOB}"}} |= "took" | regexp "took (?P<took>[0-9.]+s) for" | took > 30s':
            lambda r: took.search(r["msg"]) is not None and float(took.search(r["msg"]).group(1)) > 30,
        f'{{job="{JOB}"}} | pid != 0, local_rank="2" | trace_id!=""':
            lambda r: r["local_rank"] == 2 and r["trace_id"] is not None,
    }
    for query, keep in cases.items():
        want = sorted(r["line"] for r in rows if keep(r))
        assert len(want) > 3, query
        assert lines_of(client, query) == want, query


def test_parsers_and_formatters_on_the_corpus(client, rows):
    shaped = re.compile(r"resharding weights to vllm took ([0-9.]+)s for (\d+) tensors")
    query = (f'{{job="{JOB}"}} |= "resharding" | pattern "resharding weights to vllm took <took>s for <n> tensors" '
             '| n > 50 | line_format "{{.n}} tensors in {{.took}}s on {{.host}}"')
    want = sorted(f"{m.group(2)} tensors in {m.group(1)}s on {r['host']}" for r in rows
                  if (m := shaped.search(r["msg"])) and int(m.group(2)) > 50)
    assert len(want) > 3 and lines_of(client, query) == want
    formatted = get(client, "query_range", query=f'{{job="{JOB}"}} |= "resharding" | label_format node=host, '
                    'kind="{{.level | lower}}/{{.format}}" | keep node, kind', start=START_NS, limit=5,
                    direction="forward")
    for stream in formatted["data"]["result"]:
        assert set(stream["stream"]) == {"node", "kind"} and stream["stream"]["node"].startswith("gpu-node-")
        assert "/" in stream["stream"]["kind"] and stream["stream"]["kind"] == stream["stream"]["kind"].lower()


@pytest.mark.parametrize(("function", "reduce"), [
    ("avg_over_time", lambda v: sum(v) / len(v)), ("min_over_time", min), ("max_over_time", max),
    ("first_over_time", lambda v: v[0]), ("last_over_time", lambda v: v[-1]),
    ("stddev_over_time", lambda v: float(np.std(v))), ("quantile_over_time", lambda v: float(np.quantile(v, 0.9))),
])
def test_unwrapped_range_aggregations_by_rank(client, rows, function, reduce):
    param = "0.9, " if function == "quantile_over_time" else ""
    got = metric_range(client, f'{function}({param}{{job="{JOB}"}} | unwrap kv_cache_usage [10m]) by (rank)')
    want = windows(rows, lambda r: "kv_cache_usage" in r["fields"], lambda r: (("rank", str(r["rank"])),),
                   lambda r: float(r["fields"]["kv_cache_usage"]))
    assert set(got) == set(want)
    for key, points in want.items():
        assert got[key] == pytest.approx({t: reduce(v) for t, v in points.items()}), key
    summed = metric_range(client, f'sum by (rank) (sum_over_time({{job="{JOB}"}} | unwrap prompt_tokens [10m]))')
    tokens = windows(rows, lambda r: "prompt_tokens" in r["fields"], lambda r: (("rank", str(r["rank"])),),
                     lambda r: float(r["fields"]["prompt_tokens"]))
    assert summed == {key: {t: sum(v) for t, v in points.items()} for key, points in tokens.items()}


def test_binary_operations_between_vectors_and_with_scalars(client, rows):
    count = f'count_over_time({{job="{JOB}"}}[10m])'
    per_level = windows(rows, lambda r: True, lambda r: (("level", r["level"]),), lambda r: 1.0)
    total = {t: sum(len(points.get(t, [])) for points in per_level.values()) for t in steps()}
    shares = metric_range(client, f"sum by (level) ({count}) / ignoring(level) group_left sum({count})")
    want = {key: {t: len(v) / total[t] for t, v in points.items()} for key, points in per_level.items()}
    assert set(shares) == set(want)
    for key, points in want.items():
        assert shares[key] == pytest.approx(points)
    assert metric_range(client, f"sum({count}) * 2 + 1") == {(): {t: 2 * n + 1 for t, n in total.items() if n}}
    busy = max(total.values()) - 1
    flagged = metric_range(client, f"sum({count}) > bool {busy}")
    assert flagged == {(): {t: float(n > busy) for t, n in total.items() if n}}
    assert metric_range(client, f"sum({count}) > {busy}") == {(): {t: n for t, n in total.items() if n > busy}}
    per_rank = windows(rows, lambda r: True, lambda r: (("rank", str(r["rank"])),), lambda r: 1.0)
    errors = windows(rows, lambda r: r["level"] == "ERROR", lambda r: (("rank", str(r["rank"])),), lambda r: 1.0)
    both = metric_range(client, f'sum by (rank) ({count}) and on(rank) sum by (rank) '
                                f'(count_over_time({{job="{JOB}"}} | level="ERROR" [10m]))')
    assert both == {key: {t: len(v) for t, v in points.items() if t in errors.get(key, {})}
                    for key, points in per_rank.items() if any(t in errors.get(key, {}) for t in points)}
    without = metric_range(client, f'sum by (rank) ({count}) unless sum by (rank) '
                                   f'(count_over_time({{job="{JOB}"}} | level="ERROR" [10m]))')
    assert without == {key: kept for key, points in per_rank.items()
                       if (kept := {t: len(v) for t, v in points.items() if t not in errors.get(key, {})})}
    renamed = metric_range(client, f'label_replace(sum by (host) ({count}), "node", "$1", "host", "gpu-node-(.*)")')
    assert {dict(key)["node"] for key in renamed} == {"000", "001"}
    top = get(client, "query", query=f'topk(2, sum by (rank) (count_over_time({{job="{JOB}"}}[2h])))', time=NOW_NS)
    counts = sorted(((sum(1 for r in rows if r["rank"] == rank), str(rank)) for rank in range(8)), reverse=True)
    assert sorted(s["metric"]["rank"] for s in top["data"]["result"]) == sorted(rank for _, rank in counts[:2])


def test_volume_patterns_and_detected_fields(client, corpus, rows):
    """What Logs Drilldown reads (grafana/logs-drilldown src/services/datasource.ts): index/volume with
    limit 5000, patterns, detected_labels, detected_fields and a field's values."""
    iso = lambda ns: time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(ns / 1e9))  # noqa: E731  (Drilldown's format)
    start, end = iso(START_NS), iso(NOW_NS + 10**9)
    volume = get(client, "index/volume", query='{service_name=~".+"}', start=start, end=end, limit=5000)
    check_shape(volume, "query")
    (only,) = volume["data"]["result"]
    assert only["metric"] == {"service_name": JOB}
    assert int(only["value"][1]) == sum(len(r["line"].encode()) for r in rows)
    by_level = get(client, "index/volume", query=f'{{job="{JOB}", level=~".+"}}', start=start, end=end)
    assert {s["metric"]["level"]: int(s["value"][1]) for s in by_level["data"]["result"]} == {
        level: sum(len(r["line"].encode()) for r in rows if r["level"] == level) for level in {r["level"] for r in rows}}
    ranged = get(client, "index/volume_range", query=f'{{job="{JOB}"}}', start=start, end=end, step="600s")
    check_shape(ranged, "queryRange")
    assert sum(int(v) for s in ranged["data"]["result"] for _, v in s["values"]) == int(only["value"][1])

    found = get(client, "patterns", query=f'{{job="{JOB}"}}', start=start, end=end, step="300s")
    check_shape(found, "patterns")
    assert sum(count for p in found["data"] for _, count in p["samples"]) == len(rows)
    for pattern in found["data"][:6]:  # the pattern filter selects at least the lines it counted
        counted = sum(count for _, count in pattern["samples"])
        selected = lines_of(client, f'{{job="{JOB}"}} |> `{pattern["pattern"]}` | detected_level="{pattern["level"]}"')
        assert len(selected) >= counted, pattern["pattern"]

    labels = client.get("/loki/api/v1/detected_labels", params={"query": "", "start": start, "end": end}).json()
    check_shape(labels, "detected_labels")
    assert {item["label"]: item["cardinality"] for item in labels["detectedLabels"]} == {
        "format": len(set(corpus["format"].to_pylist())), "host": 2, "job": 1, "level": len(set(corpus["level"].to_pylist())),
        "rank": 8, "service_name": 1}
    fields = client.get("/loki/api/v1/detected_fields", params={
        "query": f'{{service_name="{JOB}"}} | json | logfmt | drop __error__, __error_details__',
        "start": start, "end": end}).json()
    check_shape(fields, "detected_fields")
    kinds = {f["label"]: (f["type"], f["parsers"]) for f in fields["fields"]}
    assert kinds["kv_cache_usage"] == ("float", None) and kinds["prompt_tokens"] == ("int", None)
    assert kinds["batch_id"] == ("string", None) and kinds["step"] == ("int", None)
    values = client.get("/loki/api/v1/detected_field/tp/values", params={"query": f'{{job="{JOB}"}}', "start": start,
                                                                          "end": end}).json()
    check_shape(values, "detected_field_values")
    assert values["values"] == sorted({str(r["fields"]["tp"]) for r in rows if "tp" in r["fields"]}, key=int)


def test_query_budgets_answer_like_loki(root):
    from ranklog.archive.loki.routes import LokiLimits
    from ranklog.query.budget import BudgetLimits

    def client_with(**limits) -> TestClient:
        api = LokiAPI(lambda _: str(root), lambda request: None, LokiLimits(budget=BudgetLimits(**limits)))
        return TestClient(Starlette(routes=api.routes()))

    by_rank = f'sum by (rank) (count_over_time({{job="{JOB}"}}[10m]))'
    answer = client_with(max_series=3).get("/loki/api/v1/query_range", params={"query": by_rank, "start": START_NS})
    assert answer.status_code == 400 and "maximum number of series (3) reached for a single query" in answer.text
    answer = client_with(memory_bytes=1024).get("/loki/api/v1/query_range", params={"query": f'{{job="{JOB}"}}',
                                                                                   "start": START_NS, "limit": 5000})
    assert answer.status_code == 400 and "query would use more than" in answer.text
    answer = client_with(timeout_s=1e-6).get("/loki/api/v1/query_range", params={"query": by_rank, "start": START_NS})
    assert answer.status_code == 504 and "request timed out" in answer.text


def test_volume_comes_from_the_index_and_is_exact_across_days(tmp_path):
    """Three days of records: a volume over a range that starts and ends inside hours (partial hours
    from the data, whole hours and whole days from the volume index) equals the bytes counted here;
    the index files exist, and a file flushed after them is counted too (read directly)."""
    from ranklog.archive.loki.routes import LokiAPI

    day0 = (NOW_NS // 10**9 // 86400 - 4) * 86400 * 10**9
    table = pa.concat_tables([generate(600, start_ns=day0 + d * 86400 * 10**9, span_s=86400, hosts=2, ranks_per_host=2,
                                       seed=20 + d).cast(arrow_schema()) for d in range(3)])
    root = tmp_path / "archive"
    write_archive(table, root)
    client = TestClient(Starlette(routes=LokiAPI(lambda _: str(root), lambda request: None).routes()))
    rows = table.to_pylist()
    times = ts_ns(table["ts"]).tolist()
    sizes = [len((r["msg"] + ("\n" + r["exc"] if r["exc"] else "")).encode()) for r in rows]

    def bytes_between(start: int, end: int, keep=lambda row: True) -> int:
        return sum(size for row, ns, size in zip(rows, times, sizes, strict=True) if start <= ns < end and keep(row))

    start, end = day0 + 5 * 3600 * 10**9 + 123_456_789, day0 + 2 * 86400 * 10**9 + 17 * 3600 * 10**9 + 42 * 10**9
    for query, keep in (('{service_name=~".+"}', lambda row: True),
                        ('{host="gpu-node-001", level=~"ERROR|WARNING"}',
                         lambda row: row["host"] == "gpu-node-001" and row["level"] in ("ERROR", "WARNING"))):
        body = get(client, "index/volume", query=query, start=start, end=end, targetLabels="job")
        check_shape(body, "query")
        assert int(body["data"]["result"][0]["value"][1]) == bytes_between(start, end, keep), query
    assert len(list((root / "_ranklog_index" / "volume").glob("date=*.rlindex"))) == 3
    late = generate(50, start_ns=day0 + 86400 * 10**9 + 3600 * 10**9, span_s=600, hosts=1, ranks_per_host=1, seed=99)
    late = late.set_column(late.schema.get_field_index("source_id"), "source_id", pa.array(["late"] * 50))
    write_archive(late.cast(arrow_schema()), root, archive_id="a2")
    extra = sum(len((r["msg"] + ("\n" + r["exc"] if r["exc"] else "")).encode()) for r in late.to_pylist())
    body = get(client, "index/volume", query='{service_name=~".+"}', start=start, end=end)
    assert int(body["data"]["result"][0]["value"][1]) == bytes_between(start, end) + extra
    ranged = get(client, "index/volume_range", query='{service_name=~".+"}', start=day0, end=day0 + 3 * 86400 * 10**9,
                 step="6h")
    check_shape(ranged, "queryRange")
    assert sum(int(v) for _, v in ranged["data"]["result"][0]["values"]) == sum(sizes) + extra
    # Loki's pieces: [start, end] cut at the step's multiples since the epoch, each reported at its end,
    # 1 ms early but the last (pkg/querier/queryrange/volume.go, pkg/util ForInterval); a step of a day
    # reads day rows, 6 h reads hour rows, and both are exact
    rows += late.to_pylist()
    times += ts_ns(late["ts"]).tolist()
    sizes += [len((r["msg"] + ("\n" + r["exc"] if r["exc"] else "")).encode()) for r in late.to_pylist()]
    for step_s in (86400, 6 * 3600):
        step = step_s * 10**9
        ranged = get(client, "index/volume_range", query='{service_name=~".+"}', start=start, end=end, step=f"{step_s}s")
        expected = {}
        for low in range(start // step * step, end, step):
            high = low + step
            at = end if high >= end else high - 10**6
            expected[at / 1e9 if at % 10**9 else at // 10**9] = bytes_between(max(low, start), min(high, end))
        assert {t: int(v) for t, v in ranged["data"]["result"][0]["values"]} == \
            {t: v for t, v in expected.items() if v}, step_s
