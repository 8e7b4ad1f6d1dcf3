"""Standard shippers into a real archive process, read back through its Loki API.

Real clients where they install: the OpenTelemetry Python SDK (``LoggingHandler`` →
``BatchLogRecordProcessor`` → ``OTLPLogExporter``, protobuf, gzip) and python-logging-loki (both of its
emitters: "1" posts Loki's JSON ``stream``/``values`` shape, "0" — its default — the legacy
``labels``/``entries`` one). Peers that cannot be installed here are driven by their documented wire
formats, encoded independently of the archive's decoders: Loki push protobuf + snappy (Promtail and
Alloy are Go binaries; the bytes are hand-encoded from ``pkg/push/push.proto``'s field numbers), OTLP/JSON
(the OTLP specification's JSON mapping), Vector's ``http`` sink (a JSON array of events, RFC 3339
``timestamp``) and Fluent Bit's ``http`` output (``msgpack`` with EventTime, in the ≥2.1 ``[[ts, meta],
record]`` and the older ``[ts, record]`` forms; ``json_lines`` and ``json`` with its ``date`` key).
"""

from __future__ import annotations

import gzip
import json
import logging
import struct
import time
import warnings

import httpx
import msgpack
import pyarrow as pa
import pytest

from tests.archive.util import metric
from tests.helpers.archive_proc import ARROW, arrow_body
from tests.helpers.corpus import generate
from tests.helpers.shipper_bodies import loki_protobuf, otlp_json, otlp_protobuf

JOB = "grpo-llama-70b"
NOW_NS = time.time_ns() // 1000 * 1000  # whole microseconds: the archive stores ts in µs


def loki(archive, query: str, **params) -> list[tuple[int, str, dict]]:
    response = httpx.get(f"{archive.url}/loki/api/v1/query_range", headers=archive.headers(),
                         params={"query": query, "limit": 5000, "direction": "forward",
                                 "start": NOW_NS - 3600 * 10**9, **params}, timeout=30)
    assert response.status_code == 200, response.text
    found = [(int(ts), line, stream["stream"]) for stream in response.json()["data"]["result"]
             for ts, line in stream["values"]]
    return sorted(found, key=lambda item: item[0])


def picked(labels: dict, *names: str) -> dict:
    """Some labels of an entry: the answer holds the stream labels with the record's structured
    metadata folded in (no categorize-labels flag), more than these tests look at."""
    return {name: labels[name] for name in names if name in labels}


def wait_for(archive, query: str, count: int, timeout: float = 20.0) -> list[tuple[int, str, dict]]:
    deadline = time.monotonic() + timeout
    while True:
        found = loki(archive, query)
        if len(found) >= count or time.monotonic() > deadline:
            assert len(found) == count, found
            return found
        time.sleep(0.2)


@pytest.fixture
def archive(start_archive):
    return start_archive("--flush-interval", "200ms")


# -- OTLP -------------------------------------------------------------------------------------------
def test_opentelemetry_sdk_logging_handler_into_the_archive(archive):
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.resources import Resource

    resource = Resource.create({"host.name": "gpu-node-007", "training_job": JOB, "rank": 5, "local_rank": 1,
                                "service.name": "trainer"})
    provider = LoggerProvider(resource=resource)
    exporter = OTLPLogExporter(endpoint=f"{archive.url}/v1/logs", headers={"Authorization": f"Bearer {archive.token}"},
                               compression=Compression.Gzip)
    provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the SDK's handler is deprecated, still shipped
        handler = LoggingHandler(level=logging.DEBUG, logger_provider=provider)
    logger = logging.getLogger("verl.trainer.otel")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        logger.info("step 12 done", extra={"step": 12})
        logger.warning("grad_norm is not finite")
        try:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        except RuntimeError:
            logger.exception("training step failed")
        assert provider.force_flush(10_000)
    finally:
        logger.removeHandler(handler)
        provider.shutdown()
    found = wait_for(archive, f'{{job="{JOB}", host="gpu-node-007", rank="5"}}', 3)
    assert [line.split("\n")[0] for _, line, _ in found] == ["step 12 done", "grad_norm is not finite",
                                                             "training step failed"]
    assert [labels["level"] for _, _, labels in found] == ["INFO", "WARNING", "ERROR"]
    assert found[2][1].startswith("training step failed\nTraceback (most recent call last)")
    assert "RuntimeError: CUDA error: an illegal memory access" in found[2][1]
    assert picked(found[0][2], "job", "host", "rank", "local_rank", "level", "format") == {
        "job": JOB, "host": "gpu-node-007", "rank": "5", "local_rank": "1", "level": "INFO", "format": "otlp"}
    # the same LogQL a Grafana errors panel sends, and the record's other fields
    errors = loki(archive, f'{{job="{JOB}", rank="5", level=~"ERROR|CRITICAL"}} |= "illegal memory"')
    assert len(errors) == 1
    rows = query_records(archive, "--job", JOB)
    assert rows[0]["logger"] == "verl.trainer.otel" and rows[0]["step"] == 12
    assert json.loads(rows[2]["attrs"])["exception.type"] == "RuntimeError"


def query_records(archive, *flags: str) -> list[dict]:
    import subprocess

    from tests.helpers.procs import ranklog_cmd

    proc = subprocess.run(ranklog_cmd("query", "--archive", str(archive.root), "--since", "2h", "--format", "ndjson",
                                      *flags), capture_output=True, text=True, timeout=120, check=True)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def test_otlp_json_gzip_and_a_retried_batch_is_stored_once(archive):
    body = gzip.compress(otlp_json("ActorDiedError: The actor died unexpectedly", NOW_NS - 10**9, 2, JOB))
    headers = archive.headers("application/json", **{"Content-Encoding": "gzip"})
    for _ in range(3):  # the exporter's retries send the same bytes
        response = httpx.post(f"{archive.url}/v1/logs", content=body, headers=headers, timeout=30)
        assert response.status_code == 200 and response.json() == {}
    (entry,) = wait_for(archive, '{trace_id="5b8efff798038103d269b633813fc60c"}', 1)
    assert entry[0] == NOW_NS - 10**9
    assert picked(entry[2], "job", "host", "rank", "level", "format", "trace_id") == {
        "job": JOB, "host": "gpu-node-008", "rank": "2", "level": "ERROR", "format": "otlp",
        "trace_id": "5b8efff798038103d269b633813fc60c"}
    assert metric(archive, "ranklog_archive_duplicate_records_total") == 2
    # with an Idempotency-Key, a retry that re-serialised the batch (new bytes) is a duplicate too
    keyed = archive.headers("application/json", **{"Idempotency-Key": "batch-0001"})
    for attempt in range(2):
        changed = otlp_json("NCCL error: unhandled system error", NOW_NS - 2 * 10**9 + attempt, 4, JOB)
        assert httpx.post(f"{archive.url}/v1/logs", content=changed, headers=keyed, timeout=30).status_code == 200
    wait_for(archive, '{rank="4"} |= "NCCL error"', 1)
    time.sleep(1)
    assert len(loki(archive, '{rank="4"}')) == 1
    assert metric(archive, "ranklog_archive_duplicate_records_total") == 3


# -- Loki push --------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", ["1", "0"])
def test_python_logging_loki_both_emitters(archive, version):
    """The client as its users configure it: it can only send basic auth (``auth=(user, password)``),
    so the token is the password."""
    import logging_loki

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        handler = logging_loki.LokiHandler(url=f"{archive.url}/loki/api/v1/push", version=version,
                                           tags={"job": JOB, "host": "gpu-node-009", "rank": "6"},
                                           auth=("trainer", archive.token))
    failures = []
    handler.handleError = failures.append  # the library raises on any answer but 204 and reports it here
    logger = logging.getLogger(f"loki-client-{version}")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        logger.info("loaded checkpoint step 400")
        logger.error("torch.OutOfMemoryError: CUDA out of memory", extra={"tags": {"role": "actor"}})
    finally:
        logger.removeHandler(handler)
        handler.close()
    assert failures == []
    found = wait_for(archive, f'{{job="{JOB}", host="gpu-node-009", rank="6"}}', 2)
    assert [line for _, line, _ in found] == ["loaded checkpoint step 400", "torch.OutOfMemoryError: CUDA out of memory"]
    assert [labels["level"] for _, _, labels in found] == ["INFO", "ERROR"]  # its "severity" label
    assert found[1][2]["role"] == "actor" and found[1][2]["format"] == "loki"
    assert query_records(archive, "--host", "gpu-node-009")[0]["logger"] == f"loki-client-{version}"


def test_loki_protobuf_snappy(archive):
    ts = NOW_NS - 3 * 10**9
    body = loki_protobuf(f'{{job="{JOB}", host="gpu-node-010", rank="7", level="error"}}',
                         [(ts, "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42)", {"trace_id": "abc123"}),
                          (ts + 1000, "second line", {})])
    headers = archive.headers("application/x-protobuf")
    for _ in range(2):
        response = httpx.post(f"{archive.url}/loki/api/v1/push", content=body, headers=headers, timeout=30)
        assert response.status_code == 204, response.text
    found = wait_for(archive, '{host="gpu-node-010"}', 2)
    assert found[0][:2] == (ts, "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42)")
    assert picked(found[0][2], "job", "host", "rank", "level", "format", "trace_id") == {
        "job": JOB, "host": "gpu-node-010", "rank": "7", "level": "ERROR", "format": "loki", "trace_id": "abc123"}
    assert found[1][0] == ts + 1000


# -- Vector and Fluent Bit ----------------------------------------------------------------------------
def test_vector_json_array_and_fluent_bit_payloads(archive):
    base = (NOW_NS // 10**9 - 60) * 10**9
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(base // 10**9)) + ".250000Z"
    vector = [{"message": "vector line", "timestamp": iso, "host": "gpu-node-011", "source_type": "file",
               "file": "/var/log/train.log", "level": "warn", "job": JOB}]
    post = lambda body, media: httpx.post(f"{archive.url}/v1/ingest", content=body,  # noqa: E731
                                          headers=archive.headers(media), timeout=30)
    assert post(json.dumps(vector).encode(), "application/json").json() == {"accepted": 1, "duplicates": 0}

    def event_time(ns: int) -> msgpack.ExtType:
        return msgpack.ExtType(0, struct.pack(">II", ns // 10**9, ns % 10**9))

    packed = (msgpack.packb([[event_time(base + 10**9), {}], {"log": "fluent v2 line", "hostname": "gpu-node-012",
                                                              "job": JOB}])
              + msgpack.packb([event_time(base + 2 * 10**9), {"log": "fluent v1 line", "hostname": "gpu-node-012",
                                                               "job": JOB, "level": "error"}]))
    assert post(packed, "application/msgpack").json() == {"accepted": 2, "duplicates": 0}
    assert post(packed, "application/msgpack").json() == {"accepted": 0, "duplicates": 2}  # a retry
    json_lines = json.dumps({"date": (base + 3 * 10**9) / 1e9, "log": "fluent json_lines", "hostname": "gpu-node-012",
                             "job": JOB}) + "\n"
    assert post(json_lines.encode(), "application/x-ndjson").json()["accepted"] == 1
    array = json.dumps([{"date": (base + 4 * 10**9) / 1e9, "log": "fluent json", "hostname": "gpu-node-012", "job": JOB}])
    assert post(array.encode(), "application/json").json()["accepted"] == 1
    found = wait_for(archive, f'{{job="{JOB}"}}', 5)
    assert [(ts, line, labels["host"]) for ts, line, labels in found] == [
        (base + 250_000_000, "vector line", "gpu-node-011"), (base + 10**9, "fluent v2 line", "gpu-node-012"),
        (base + 2 * 10**9, "fluent v1 line", "gpu-node-012"), (base + 3 * 10**9, "fluent json_lines", "gpu-node-012"),
        (base + 4 * 10**9, "fluent json", "gpu-node-012")]
    assert [labels["level"] for _, _, labels in found][:3] == ["WARNING", "UNKNOWN", "ERROR"]


# -- foreign bodies ------------------------------------------------------------------------------------
def test_a_body_on_the_wrong_endpoint_is_refused_naming_the_right_one(archive):
    otlp_body = otlp_json("x", NOW_NS, 1, JOB)
    loki_json = json.dumps({"streams": [{"stream": {"job": "x"}, "values": [[str(NOW_NS), "x"]]}]}).encode()
    otlp_proto = otlp_protobuf("x", NOW_NS, 1, JOB)
    loki_proto = loki_protobuf('{job="x"}', [(NOW_NS, "x", {})])
    arrow = arrow_body(generate(3, start_ns=NOW_NS, seed=1))
    cases = [
        ("/v1/ingest", "application/json", otlp_body, "POST it to /v1/logs"),
        ("/v1/ingest", "application/x-ndjson", loki_json, "POST it to /loki/api/v1/push"),
        ("/v1/ingest", "application/x-protobuf", otlp_proto, "/v1/logs"),
        ("/v1/logs", "application/json", loki_json, "POST it to /loki/api/v1/push"),
        ("/v1/logs", "application/json", b'{"msg": "an ndjson record"}\n', "POST it to /v1/ingest"),
        ("/v1/logs", "application/x-protobuf", loki_proto, "POST it to /loki/api/v1/push"),
        ("/v1/logs", "application/x-protobuf", arrow, "POST it to /v1/ingest"),
        ("/loki/api/v1/push", "application/json", otlp_body, "POST it to /v1/logs"),
        ("/loki/api/v1/push", "application/x-protobuf", otlp_proto, "POST it to /v1/logs"),
        ("/loki/api/v1/push", "application/x-protobuf", arrow, "POST it to /v1/ingest"),
        ("/loki/api/v1/push", "application/json", b'[{"message": "vector"}]', "POST it to /v1/ingest"),
    ]
    for path, media, body, message in cases:
        response = httpx.post(f"{archive.url}{path}", content=body, headers=archive.headers(media), timeout=30)
        assert response.status_code == 400, (path, media, response.text)
        assert message in response.json()["error"], (path, media, response.text)
    unsupported = httpx.post(f"{archive.url}/v1/logs", content=b"x", headers=archive.headers("text/plain"), timeout=30)
    assert unsupported.status_code == 415
    assert metric(archive, "ranklog_archive_ingested_records_total") == 0
    assert metric(archive, "ranklog_archive_rejected_requests_total", 'reason="wrong_endpoint"') == len(cases)
    # and the archive still takes its own shapes afterwards
    assert httpx.post(f"{archive.url}/v1/ingest", content=arrow, headers=archive.headers(ARROW), timeout=30).json() \
        == {"accepted": 3, "duplicates": 0}
    assert pa.ipc.open_stream(arrow).read_all().num_rows == 3
