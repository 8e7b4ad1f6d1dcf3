"""Per-node tokens over real HTTP against a real archive process (issue 20, item 4): every ingest
endpoint refuses records of a host the token may not write (403 naming the host, nothing stored,
counted, logged without the token), and the identity-namespaced dedup keys survive a crash (WAL
replay with the identity, no snapshot)."""

from __future__ import annotations

import json
import signal
import time

import httpx
import pyarrow as pa
import pytest

from tests.helpers.archive_proc import ARROW, NDJSON, arrow_body, read_archive, running_archive
from tests.helpers.shipper_bodies import loki_protobuf, otlp_json

pytestmark = pytest.mark.slow
TS_NS = 1_796_220_000_000_000_000
SOURCE = "node-b:801:1f:abc"


def _ndjson(host: str, offsets: list[int], msg: str = "line") -> bytes:
    return "\n".join(json.dumps({"ts": "2026-12-02T13:04:05Z", "msg": f"{msg}@{o}", "host": host, "source": "/x.log",
                                 "source_id": SOURCE, "offset": o}) for o in offsets).encode()


def _arrow(host: str, offsets: list[int]) -> bytes:
    n = len(offsets)
    return arrow_body(pa.table({"ts": pa.array([TS_NS] * n, pa.timestamp("ns", tz="UTC")), "level": ["INFO"] * n,
                                "msg": [f"arrow@{o}" for o in offsets], "host": [host] * n, "ip": [""] * n,
                                "source": ["/y.log"] * n, "source_id": [SOURCE] * n,
                                "offset": pa.array(offsets, pa.int64()), "format": ["text"] * n}))


def _bodies(host: str) -> dict[str, tuple[str, str, bytes]]:
    """One body per ingest endpoint and shape, each holding records of `host`."""
    loki = {"streams": [{"stream": {"host": host, "job": "j"}, "values": [[str(TS_NS), "loki json"]]}]}
    return {
        "ndjson": ("/v1/ingest", NDJSON, _ndjson(host, [0, 10**15])),
        "arrow": ("/v1/ingest", ARROW, _arrow(host, [5, 7])),
        "vector json array": ("/v1/ingest", "application/json",
                              json.dumps([{"message": "vector", "host": host, "timestamp": "2026-12-02T13:04:05Z"}]).encode()),
        "otlp json": ("/v1/logs", "application/json", otlp_json("otlp", TS_NS, 0, "j", host=host)),
        "loki json": ("/loki/api/v1/push", "application/json", json.dumps(loki).encode()),
        "loki protobuf": ("/loki/api/v1/push", "application/x-protobuf",
                          loki_protobuf(f'{{host="{host}", job="j"}}', [(TS_NS, "loki pb", {})])),
    }


def _metric(text: str, name: str, **labels: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


def test_every_ingest_endpoint_refuses_a_foreign_host(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("tok-a node-a node-a node-a.example.com\ntok-b node-b\nshared-secret\n")
    with running_archive(tmp_path / "archive", tokens, extra_args=("--flush-interval", "200ms")) as archive, \
            httpx.Client(timeout=30) as client:
        refused = {}
        for name, (path, ctype, body) in _bodies("node-b").items():
            answer = client.post(f"{archive.url}{path}", content=body,
                                 headers={"Authorization": "Bearer tok-a", "Content-Type": ctype})
            refused[name] = answer.status_code
            assert answer.status_code == 403, (name, answer.text)
            error = answer.json()
            assert error["reason"] == "host_not_allowed" and error["hosts"] == ["node-b"], name
            assert "node-b" in error["error"] and "node-a" in error["error"] and "tok-a" not in answer.text
        # the same bodies under the token's own host pass, and a shared token may write any host
        for name, (path, ctype, body) in _bodies("node-a.example.com").items():
            answer = client.post(f"{archive.url}{path}", content=body,
                                 headers={"Authorization": "Bearer tok-a", "Content-Type": ctype})
            assert answer.status_code in (200, 204), (name, answer.text)
        for name, (path, ctype, body) in _bodies("node-b").items():
            answer = client.post(f"{archive.url}{path}", content=body,
                                 headers={"Authorization": "Bearer shared-secret", "Content-Type": ctype})
            assert answer.status_code in (200, 204), (name, answer.text)
        # one foreign record refuses the whole batch: nothing of it is stored
        mixed = _ndjson("node-a", [1, 2]) + b"\n" + _ndjson("node-b", [3])
        answer = client.post(f"{archive.url}/v1/ingest", content=mixed,
                             headers={"Authorization": "Bearer tok-a", "Content-Type": NDJSON})
        assert answer.status_code == 403 and answer.json()["hosts"] == ["node-b"]
        metrics = client.get(f"{archive.url}/metrics").text
        deadline = time.monotonic() + 30
        while read_archive(archive.root).num_rows < 16 and time.monotonic() < deadline:
            time.sleep(0.2)
        table = read_archive(archive.root)
    assert _metric(metrics, "ranklog_archive_refused_records_total", reason="host_not_allowed") == 2 + 2 + 1 + 1 + 1 + 1 + 1
    assert _metric(metrics, "ranklog_archive_rejected_requests_total", reason="host_not_allowed") == 7
    assert sorted(table["host"].to_pylist()) == ["node-a.example.com"] * 8 + ["node-b"] * 8, \
        table.select(["host", "msg", "source_id", "offset"]).to_pylist()
    assert not {1, 2, 3} & set(table["offset"].to_pylist())
    log = archive.log_path.read_text()
    assert "may not write" in log and "node-b" in log and "identity 'node-a'" in log
    assert "tok-a" not in log and "tok-b" not in log and "shared-secret" not in log


def test_namespaced_keys_survive_a_crash_through_wal_replay(tmp_path):
    """Keys written by node-b and by a shared token, the archive SIGKILLed before any dedup snapshot:
    after replay each namespace still knows exactly its own keys."""
    tokens = tmp_path / "tokens"
    tokens.write_text("tok-b node-b\nshared-secret\n")
    args = ("--flush-interval", "200ms", "--snapshot-interval", "1h")

    def post(client, archive, token: str, body: bytes) -> dict:
        answer = client.post(f"{archive.url}/v1/ingest", content=body,
                             headers={"Authorization": f"Bearer {token}", "Content-Type": NDJSON})
        assert answer.status_code == 200, answer.text
        return answer.json()

    with running_archive(tmp_path / "archive", tokens, extra_args=args) as archive, httpx.Client(timeout=30) as client:
        assert post(client, archive, "tok-b", _ndjson("node-b", [0, 100])) == {"accepted": 2, "duplicates": 0}
        assert post(client, archive, "shared-secret", _ndjson("node-b", [0], "shared")) == {"accepted": 1, "duplicates": 0}
        archive.stop(signal.SIGKILL)
        archive.restart()
        assert post(client, archive, "tok-b", _ndjson("node-b", [0, 100, 200])) == {"accepted": 1, "duplicates": 2}
        assert post(client, archive, "shared-secret", _ndjson("node-b", [0, 100], "shared")) == {"accepted": 1, "duplicates": 1}
    log = archive.log_path.read_text()
    assert "replayed" in log
