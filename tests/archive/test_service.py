"""The service surface: refusals (401/413/429/503/507), token reload, health, metrics, OpenAPI,
8 concurrent clients, TLS."""

from __future__ import annotations

import datetime
import ipaddress
import secrets
import threading
import time

import httpx
import pytest

from ranklog.metrics import METRICS
from tests.helpers.archive_proc import ARROW, arrow_body, running_archive

from .util import metric, post, post_table, wait_rows


def test_refusals_and_token_reload(start_archive, small_corpus, tmp_path, token_file):
    free = tmp_path / "free-bytes"
    free.write_text(str(10 * 1024**3))
    archive = start_archive("--max-body-size", "64KiB", "--disk-reserve", "1GiB", "--free-space-file", str(free))
    body = arrow_body(small_corpus.slice(0, 50))
    # 401: none, wrong scheme, wrong token; the token never shows up in the log.
    assert httpx.post(f"{archive.url}/v1/ingest", content=body, headers={"Content-Type": ARROW}).status_code == 401
    for auth in (f"Basic {archive.token}", "Bearer wrong", "Bearer"):
        answer = httpx.post(f"{archive.url}/v1/ingest", content=body,
                            headers={"Content-Type": ARROW, "Authorization": auth})
        assert answer.status_code == 401 and answer.headers["www-authenticate"].startswith("Bearer")
    # 413: declared too large, and streamed (chunked, no Content-Length) too large.
    big = arrow_body(small_corpus, compression=None)
    assert len(big) > 64 * 1024
    assert post(archive, big).status_code == 413
    chunks = (big[i:i + 8192] for i in range(0, len(big), 8192))
    answer = httpx.post(f"{archive.url}/v1/ingest", content=chunks, headers=archive.headers())
    assert answer.status_code == 413 and "max_body_size" in answer.json()["error"]
    # 507 while the (injected) free space is below the reserve; back to 200 when it recovers.
    free.write_text(str(100 * 1024**2))  # the probe caches for 1 s: a request may still pass meanwhile
    answer = _eventually(lambda: post(archive, arrow_body(small_corpus.slice(100, 50))), 507)
    assert "reserve" in answer.json()["error"]
    free.write_text(str(10 * 1024**3))
    answer = _eventually(lambda: post(archive, arrow_body(small_corpus.slice(200, 50))), 200)
    assert answer.json() == {"accepted": 50, "duplicates": 0}
    # Revocation without restart: replace the token file; the old token stops working.
    old = archive.token
    new = secrets.token_hex(16)
    token_file.write_text(new + "\n")
    answer = _eventually(lambda: httpx.post(f"{archive.url}/v1/ingest", content=body,
                                            headers={"Content-Type": ARROW, "Authorization": f"Bearer {old}"}), 401)
    answer = post(archive, body)  # may have been stored by an old-token request before the reload
    assert answer.status_code == 200 and sum(answer.json().values()) == 50
    assert metric(archive, "ranklog_archive_rejected_requests_total", 'reason="unauthorized"') >= 5
    assert metric(archive, "ranklog_archive_rejected_requests_total", 'reason="too_large"') == 2
    assert metric(archive, "ranklog_archive_rejected_requests_total", 'reason="disk_full"') >= 1
    assert old not in archive.log_text() and new not in archive.log_text()


def _eventually(call, status: int, attempts: int = 40):
    for _ in range(attempts):
        answer = call()
        if answer.status_code == status:
            return answer
        time.sleep(0.1)
    raise AssertionError(f"never got {status}; last {answer.status_code} {answer.text}")


def test_overload_answers_429_and_flush_backlog_503(start_archive, small_corpus):
    archive = start_archive("--max-inflight-requests", "0")
    answer = post(archive, arrow_body(small_corpus.slice(0, 10)))
    assert answer.status_code == 429 and int(answer.headers["retry-after"]) >= 1
    archive.stop()
    archive.extra_args = ("--archive-id", "t1", "--max-pending-bytes", "1", "--flush-interval", "1h")
    archive.start()
    assert post_table(archive, small_corpus.slice(0, 10))["accepted"] == 10  # fills the queue past 1 byte
    answer = post(archive, arrow_body(small_corpus.slice(10, 10)))
    assert answer.status_code == 503 and int(answer.headers["retry-after"]) >= 1
    assert metric(archive, "ranklog_archive_rejected_requests_total", 'reason="flush_backlog"') == 1


def test_health_metrics_and_openapi(start_archive, small_corpus):
    archive = start_archive("--flush-interval", "200ms", "--snapshot-interval", "200ms")
    assert httpx.get(f"{archive.url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{archive.url}/readyz").json()["status"] == "ready"
    post_table(archive, small_corpus.slice(0, 300))
    post_table(archive, small_corpus.slice(0, 300))
    wait_rows(archive.root, 300)
    text = httpx.get(f"{archive.url}/metrics").text
    for name, spec in METRICS.items():
        if spec.component == "archive":
            assert f"# HELP {name} " in text, name
    assert metric(archive, "ranklog_archive_ingested_records_total") == 300
    assert metric(archive, "ranklog_archive_duplicate_records_total") == 300
    assert metric(archive, "ranklog_archive_flush_seconds_count") >= 1
    deadline = time.monotonic() + 10  # the index's gauges move at its next snapshot
    while metric(archive, "ranklog_archive_dedup_sources") < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    sources = len(set(small_corpus.slice(0, 300).column("source_id").to_pylist()))
    assert metric(archive, "ranklog_archive_dedup_sources") == sources
    # posted without declared spans, each record's (source_id, offset) key is a range of its own
    assert metric(archive, "ranklog_archive_dedup_ranges") == 300
    document = httpx.get(f"{archive.url}/openapi.json").json()
    assert document["openapi"].startswith("3.")
    ingest = document["paths"]["/v1/ingest"]["post"]
    assert {"200", "400", "401", "413", "429", "503", "507"} <= set(ingest["responses"])
    assert set(ingest["requestBody"]["content"]) == {"application/vnd.apache.arrow.stream", "application/x-ndjson"}


@pytest.mark.slow
def test_eight_concurrent_clients(start_archive, small_corpus):
    archive = start_archive("--flush-interval", "200ms")
    batches = [small_corpus.slice(i, 250) for i in range(0, small_corpus.num_rows, 250)]  # 16 batches
    results: list[dict] = []
    errors: list[str] = []

    def client(number: int) -> None:
        with httpx.Client(timeout=60) as http:
            # Every client sends its own two batches and re-sends one of its neighbour's.
            for index in (2 * number, 2 * number + 1, (2 * number + 2) % len(batches)):
                answer = http.post(f"{archive.url}/v1/ingest", content=arrow_body(batches[index]),
                                   headers=archive.headers())
                (results if answer.status_code == 200 else errors).append(
                    answer.json() if answer.status_code == 200 else answer.text)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert sum(r["accepted"] for r in results) == small_corpus.num_rows
    assert sum(r["duplicates"] for r in results) == 8 * 250
    assert wait_rows(archive.root, small_corpus.num_rows).num_rows == small_corpus.num_rows


def _self_signed(directory) -> tuple[str, str]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


def test_tls(tmp_path, token_file, small_corpus):
    cert, key = _self_signed(tmp_path)
    with running_archive(tmp_path / "tls-archive", token_file, scheme="https", ca_file=cert,
                         extra_args=["--tls-cert", cert, "--tls-key", key, "--flush-interval", "200ms"]) as archive:
        assert archive.url.startswith("https://")
        assert post_table(archive, small_corpus.slice(0, 100)) == {"accepted": 100, "duplicates": 0}
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{archive.url}/healthz", verify=True)  # not trusted without the CA
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{archive.port}/healthz")  # plain HTTP is not served
        assert wait_rows(archive.root, 100).num_rows == 100
