"""The archive's Loki read API: LogQL over the query engine, Loki's parameters, shapes and errors.

The archive is written through the archive's own writer (tests.helpers.query_data), then served by
the archive's routes in-process (Starlette's TestClient: real HTTP semantics, no socket). Answers
are compared with the engine (``ranklog query``'s path) and, for the Grafana panel shape, with the
``ranklog query`` CLI as a real process. Every response is validated against ``loki_schema.json``,
written from Loki's HTTP API reference.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import jsonschema
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


def test_line_filters_chain_and_lines_carry_the_traceback(client, root):
    body = get(client, "query_range", query='{rank="3"} |= "CUDA error" != "nothing-like-this" |~ "device-.*assert"',
               start=START_NS, end=NOW_NS)
    got = entries(body)
    assert len(got) == 1
    _, line, labels = got[0]
    assert line.startswith("RuntimeError: CUDA error: device-side assert\nTraceback (most recent call last)")
    assert labels == {"job": JOB, "host": "gpu-node-000", "rank": "3", "local_rank": "3", "role": "trainer",
                      "level": "ERROR", "format": "python", "trace_id": "feedbeef"}
    # a filter on the traceback text finds the record (the line includes it), a negative one drops it
    assert len(entries(get(client, "query_range", query='{trace_id="feedbeef"} |= "RuntimeError: boom"'))) == 1
    assert entries(get(client, "query_range", query='{trace_id="feedbeef"} != "boom"')) == []
    # json / logfmt / drop stages are accepted and change nothing
    assert len(entries(get(client, "query_range", query='{trace_id="feedbeef"} | json | logfmt | drop __error__'))) == 1


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
    assert labels["data"] == ["format", "host", "job", "level", "local_rank", "rank", "role", "trace_id"]
    ranks = get(client, "label/rank/values", start=START_NS, end=NOW_NS)
    check_shape(ranks, "labels_list")
    assert ranks["data"] == [str(r) for r in range(8)]
    assert get(client, "label/host/values", query='{rank="5"}')["data"] == ["gpu-node-001"]
    assert get(client, "label/nonexistent/values")["data"] == []
    series = get(client, "series", **{"match[]": '{trace_id="feedbeef"}'})
    check_shape(series, "series")
    assert series["data"] == [{"job": JOB, "host": "gpu-node-000", "rank": "3", "local_rank": "3", "role": "trainer",
                               "level": "ERROR", "format": "python", "trace_id": "feedbeef"}]
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
    ("query_range", {"query": '{job="x"} | line_format "{{.msg}}"'}, "pipeline stage 'line_format'"),
    ("query_range", {"query": 'topk(3, count_over_time({job="x"}[1m]))'}, "not supported by the ranklog archive: 'topk'"),
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
    assert entries(get(client, "query_range", query='{service_name="x"}')) == []
    assert len(entries(get(client, "query_range", query='{service_name="", trace_id="feedbeef"}'))) == 1
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
