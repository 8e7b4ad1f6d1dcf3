"""Fuzzing the shipper ingest endpoints and the Loki read API (neither is driven by the OpenAPI fuzzing).

Hypothesis draws, against a live archive holding records:

- ingest: each endpoint × each media type it or another endpoint takes × identity/gzip/broken gzip,
  with valid bodies of every shape (OTLP protobuf/JSON, Loki protobuf/JSON, msgpack, JSON arrays,
  Arrow), the same truncated or with flipped bytes, random bytes and random JSON, with and without
  an Idempotency-Key. Every answer must be 2xx or 4xx;
- read: LogQL built from valid and broken fragments of the whole grammar (parsers, label filters,
  formats, unwrap, binary operators, pattern filters) plus random text, with awkward times, limits,
  steps and directions, on every read endpoint — Logs Drilldown's too — and label/field names in the
  path, with and without Grafana's categorize-labels flag. 4xx is fine, 5xx a bug.
"""

from __future__ import annotations

import gzip
import json
import time
from urllib.parse import quote

import httpx
import msgpack
import pytest

from tests.archive.util import metric
from tests.helpers.archive_proc import ARROW, NDJSON, arrow_body, running_archive
from tests.helpers.corpus import generate
from tests.helpers.shipper_bodies import loki_protobuf, otlp_json, otlp_protobuf
from tests.reliability.report import Row

INGEST_CASES = 150
READ_CASES = 400
NOW_NS = time.time_ns()
ENDPOINTS = ("/v1/ingest", "/v1/logs", "/loki/api/v1/push")
MEDIA = ("application/json", "application/x-protobuf", "application/msgpack", NDJSON, ARROW, "text/plain")
READ_PATHS = ("query_range", "query", "labels", "label/rank/values", "label/{random}/values", "series", "index/stats",
              "index/volume", "index/volume_range", "patterns", "detected_labels", "detected_fields",
              "detected_field/{random}/values", "status/buildinfo", "drilldown-limits")
FRAGMENTS = ('{job="j0"}', '{rank=~"1|2"}', '{host!="h"}', "{", "}", '|= "record"', '!= "x"', '|~ "rec.*"', '!~ "("',
             "| json", "| logfmt", "| line_format", "count_over_time(", "rate(", "bytes_over_time(", "[5m]", "[0s]",
             "[", ")", "(", "sum by (level)", "count without (rank)", "topk(", ",", '"', "`", "or", "1e400", "{}",
             '{trace_id=""}', '{level="error"}', "sum(", "avg(", "max(",
             '| json a="b.c[0]"', "| logfmt --strict", "| logfmt --keep-empty", '| regexp "(?P<n>\\d+)"', '| regexp "("',
             '| pattern "<a> <_>"', '| pattern "<a><b>"', '| line_format "{{.a}} {{ __line__ | trunc 3 }}"',
             '| line_format "{{range .}}"', "| label_format a=b", '| label_format c="{{.rank}}"', "| keep rank",
             '| drop level, a="x"', "| unwrap", "| unwrap step", "| unwrap duration(a)", "| unwrap bytes(b)",
             "step > 25", "duration >= 10s", "size < 20MB", "and", "or", "rank=3", "|>", "!>", '"<_> record <_>"',
             "avg_over_time(", "quantile_over_time(0.9,", "stddev_over_time(", "first_over_time(", "by (rank)",
             "without (host)", "on(rank)", "ignoring(level)", "group_left", "bool", "vector(1)", "+", "/", "^", "%",
             "==", "> bool", "label_replace(", '"dst", "$1", "rank", "(.*)")', "offset 1h", "topk(2,", "sort_desc(",
             "absent_over_time(", "| decolorize", "| unpack", "__error__=\"\"", "detected_level=~\"error|warn\"",
             '{service_name=~".+"}', "#", "1e309", "-")
VALID = ('{job="j0"}', '{job=~"j.*", rank!="1"} |= "record" != "x"', '{host="h"} |~ "rec(ord)? [0-9]+" | json',
         "vector(1)+vector(1)", '{job="j1"} | json | rank > 1 or level="INFO" | line_format "{{.rank}}: {{__line__}}"',
         'avg_over_time({host="h"} | logfmt | unwrap rank [1m]) by (job)',
         'sum by (job) (rate({host="h"}[5m])) / ignoring(job) group_left sum(rate({host="h"}[5m]))',
         '{service_name="j2"} | json | logfmt | drop __error__, __error_details__ | keep job',
         '{job="j0"} |> "<_> record <_>" | pattern "<w> <n>" | n >= 5 | label_format m="{{.n}}"',
         'quantile_over_time(0.5, {job="j0"} | regexp "(?P<n>[0-9]+)" | unwrap n | __error__="" [1h]) by (rank)',
         'sum by (rank) (count_over_time({job="j1"}[1m]))', 'rate({host="h"}[5m])', 'count(bytes_over_time({job="j2"}[1h]))',
         'sum(count_over_time({level="unknown"} | logfmt | drop __error__ [30s])) by (job)', '{service_name=""}')
AWKWARD = ("", "0", "-1", "now", "now-1h", "1h", "2h ago", "1e400", "NaN", "99999999999999999999999",
           "2026-12-02T13:00:00Z", "9999-99-99", "1.5", "forward", "BACKWARD", "sideways", "5000", "5001", "x" * 500, "\x00")


def _samples() -> list[tuple[bytes, str]]:
    job = "fuzz"
    return [
        (otlp_protobuf("otlp record", NOW_NS, 1, job), "application/x-protobuf"),
        (otlp_json("otlp json record", NOW_NS, 2, job), "application/json"),
        (loki_protobuf('{job="fuzz", rank="3"}', [(NOW_NS, "loki record", {"trace_id": "t"})]), "application/x-protobuf"),
        (json.dumps({"streams": [{"stream": {"job": job}, "values": [[str(NOW_NS), "loki json"]]}]}).encode(),
         "application/json"),
        (json.dumps({"streams": [{"labels": '{job="fuzz"}', "entries": [{"ts": "2026-12-04T10:00:00Z", "line": "v0"}]}]})
         .encode(), "application/json"),
        (msgpack.packb([[msgpack.ExtType(0, (NOW_NS // 10**9).to_bytes(4, "big") + b"\0\0\0\0"), {}], {"log": "fb"}]),
         "application/msgpack"),
        (json.dumps([{"message": "vector", "timestamp": "2026-12-04T10:00:00Z", "host": "h"}]).encode(), "application/json"),
        (b'{"msg": "ndjson", "date": 1796377758.5}\n', NDJSON),
        (arrow_body(generate(2, start_ns=NOW_NS, seed=3)), ARROW),
    ]


def _damaged(sample: bytes, cut: int, flip: int) -> bytes:
    data = bytearray(sample[: max(1, cut % (len(sample) + 1))])
    if data:
        data[flip % len(data)] ^= 0xFF
    return bytes(data)


@pytest.mark.slow
def test_shipper_endpoints_and_loki_api_fuzzing(tmp_path, token_file, record_row):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    samples = _samples()
    bodies = st.one_of(
        st.sampled_from(samples),
        st.builds(lambda s, cut, flip, media: (_damaged(s[0], cut, flip), media), st.sampled_from(samples),
                  st.integers(0, 4096), st.integers(0, 4096), st.sampled_from(MEDIA)),
        st.tuples(st.binary(max_size=1024), st.sampled_from(MEDIA)),
        st.tuples(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                               lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                                                           max_size=4),
                               max_leaves=10).map(lambda v: json.dumps(v).encode()), st.sampled_from(MEDIA)),
    )
    requests = st.tuples(st.sampled_from(ENDPOINTS), bodies, st.sampled_from(("identity", "gzip", "broken-gzip")),
                         st.one_of(st.none(), st.text(st.characters(min_codepoint=32, max_codepoint=255), max_size=300)))
    logql = st.one_of(st.sampled_from(VALID), st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=6).map(" ".join), st.text(max_size=40))
    params = st.fixed_dictionaries({"query": logql}, optional={
        name: st.one_of(st.sampled_from(AWKWARD), st.text(max_size=12))
        for name in ("start", "end", "since", "limit", "step", "direction", "time", "interval")})
    reads = st.tuples(st.sampled_from(READ_PATHS), params, st.text(min_size=1, max_size=12), st.booleans(),
                      st.booleans())
    statuses: dict[str, int] = {}
    failures: list[str] = []
    accepted = [0]

    with running_archive(tmp_path / "archive", token_file, log_path=tmp_path / "archive.log",
                         extra_args=["--flush-interval", "200ms"]) as archive, httpx.Client(timeout=60) as client:
        rows = b"".join(json.dumps({"msg": f"record {n}", "job": f"j{n % 3}", "rank": n % 4, "host": "h"}).encode() + b"\n"
                        for n in range(40))
        accepted[0] += client.post(f"{archive.url}/v1/ingest", content=rows, headers=archive.headers(NDJSON)).json()["accepted"]

        def note(method: str, what: str, status: int) -> None:
            statuses[str(status)] = statuses.get(str(status), 0) + 1
            if not 0 < status < 500:
                failures.append(f"{method} {what} → {status or 'no answer'}")

        @settings(max_examples=INGEST_CASES, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(requests)
        def ingest(request) -> None:
            path, (body, media), encoding, key = request
            headers = archive.headers(media)
            if encoding != "identity":
                body = gzip.compress(body) if encoding == "gzip" else b"\x1f\x8b\x08\x00broken"
                headers["Content-Encoding"] = "gzip"
            if key and key.strip():  # a header value cannot start or end with whitespace (client-side rule)
                headers["Idempotency-Key"] = key.strip().encode("latin-1")
            try:
                answer = client.post(f"{archive.url}{path}", content=body, headers=headers)
                status = answer.status_code
                if status == 200 and path == "/v1/ingest":
                    accepted[0] += answer.json()["accepted"]
            except (httpx.TransportError, httpx.InvalidURL, UnicodeError) as exc:
                status = 0
                media += f" ({type(exc).__name__}: {exc})"
            note("POST", f"{path} {media} {encoding} {body[:60]!r}", status)

        @settings(max_examples=READ_CASES, deadline=None, database=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(reads)
        def read(request) -> None:
            path, query, label, post, categorize = request
            url = f"{archive.url}/loki/api/v1/{path.replace('{random}', quote(label, safe=''))}"
            flags = {"X-Loki-Response-Encoding-Flags": "categorize-labels"} if categorize else {}
            try:
                if post and path not in ("status/buildinfo", "drilldown-limits"):
                    answer = client.post(url, data=query, headers=archive.headers("application/x-www-form-urlencoded",
                                                                                  **flags))
                else:
                    answer = client.get(url, params=query, headers=archive.headers(**flags))
                status = answer.status_code
            except (httpx.TransportError, httpx.InvalidURL, UnicodeError) as exc:
                status = 0
                path += f" ({type(exc).__name__}: {exc})"
            note("GET/POST", f"{path} {label!r} {query!r}", status)

        started = time.monotonic()
        ingest()
        read()
        seconds = time.monotonic() - started
        alive = archive.proc.poll() is None and httpx.get(f"{archive.url}/readyz", timeout=10).status_code == 200
        stored = metric(archive, "ranklog_archive_ingested_records_total")
        refused = metric(archive, "ranklog_archive_rejected_requests_total", 'reason="wrong_endpoint"')
        crashes = archive.log_text().count("Exception in ASGI application")
    record_row(Row("security: shipper + Loki API fuzzing",
                   f"hypothesis: {INGEST_CASES} ingest requests (OTLP/Loki/msgpack/JSON/Arrow bodies, valid, damaged, "
                   f"random, on every endpoint and media type, gzip or not) and {READ_CASES} Loki API reads on all "
                   f"{len(READ_PATHS)} read paths incl. Logs Drilldown's (LogQL fragments of the whole grammar + random "
                   "text, awkward times/limits/steps, with and without categorize-labels)",
                   "no 5xx, no dropped connection, process alive and ready, no unhandled exception",
                   notes=f"statuses {statuses} in {seconds:.0f} s; {int(stored)} records stored; {int(refused)} "
                         f"wrong-endpoint refusals; {len(failures)} server errors, e.g. {failures[:3]}"))
    assert alive and crashes == 0
    assert not failures, f"{len(failures)} requests got a 5xx or no answer:\n" + "\n".join(failures[:10])
    assert stored >= accepted[0] > 0
