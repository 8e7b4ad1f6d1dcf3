"""Bounded clients (issue 20): one token's slow or hostile clients cannot starve another token's ingest.

Slow bodies: 70 uploads on token A send their headers, then trickle the body (100 bytes every
0.3 s) — the slowloris that once filled every ingest slot. Meanwhile token B posts a small NDJSON
batch every 0.2 s. Per-token in-flight limits answer A's surplus 429 at once; the body timeout
answers the admitted ones 408 and closes their connections; B keeps getting 200 within 2 s.

Slow heads: 200 connections send an ingest request's head a byte every 0.25 s (it never completes
in time). The header timeout answers each 408 and closes it; B's steady ingest keeps getting 200
within 2 s; a request with 1 MB of headers gets 431, one with moderate headers (~16 KB) is stored.
"""

from __future__ import annotations

import json
import secrets
import threading
import time

import httpx
import pytest

from tests.helpers.archive_proc import NDJSON, running_archive
from tests.helpers.slow_heads import oversized_head, trickle_body, trickle_heads
from tests.reliability.report import Row

pytestmark = pytest.mark.slow
SLOW, SECONDS = 70, 8.0


def _slow_upload(port: int, token: str, outcomes: list[str], stop: threading.Event) -> None:
    """Headers at once, then a trickle; records the status line the archive answered (or how it ended)."""
    outcomes.append(trickle_body(port, (f"POST /v1/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "
                                        f"{token}\r\nContent-Type: {NDJSON}\r\nContent-Length: 10000000\r\n\r\n")
                                 .encode(), stop.is_set))


def _steady_ingest(url: str, token: str, seconds: float, source: str = "steady") -> list[tuple[int, float]]:
    """POST 10 NDJSON records every 0.2 s for `seconds`; (status, latency) of each request."""
    latencies: list[tuple[int, float]] = []
    headers = {"Authorization": f"Bearer {token}", "Content-Type": NDJSON}
    with httpx.Client(timeout=10) as client:
        deadline, n = time.monotonic() + seconds, 0
        while time.monotonic() < deadline:
            body = "\n".join(json.dumps({"msg": f"{source} {n}.{i}", "source_id": source, "offset": n * 10 + i})
                             for i in range(10)).encode()
            started = time.monotonic()
            status = client.post(f"{url}/v1/ingest", content=body, headers=headers).status_code
            latencies.append((status, time.monotonic() - started))
            n += 1
            time.sleep(0.2)
    return latencies


def test_slow_uploaders_on_one_token_do_not_starve_another(tmp_path, record_row):
    slow_token, steady_token = secrets.token_hex(16), secrets.token_hex(16)
    token_file = tmp_path / "tokens"
    token_file.write_text(f"{steady_token}\n{slow_token}\n")
    outcomes: list[str] = []
    stop = threading.Event()
    with running_archive(tmp_path / "archive", token_file,
                         extra_args=("--body-timeout", "4s", "--max-inflight-per-token", "16")) as archive:
        threads = [threading.Thread(target=_slow_upload, args=(archive.port, slow_token, outcomes, stop), daemon=True)
                   for _ in range(SLOW)]
        for thread in threads:
            thread.start()
        time.sleep(0.5)  # the trickle is under way
        latencies = _steady_ingest(archive.url, steady_token, SECONDS)
        stop.set()
        for thread in threads:
            thread.join(10)
        rejected = archive_metrics(archive.url)
    statuses = {}
    for line in outcomes:
        code = line.split(" ")[1] if line.startswith("HTTP/") else line
        statuses[code] = statuses.get(code, 0) + 1
    worst = max(seconds for _, seconds in latencies)
    ok = sum(1 for status, seconds in latencies if status == 200 and seconds < 2.0)
    record_row(Row(
        "slow uploaders", f"{SLOW} uploads on one token send headers then trickle 100 B every 0.3 s; meanwhile another "
        f"token posts 10 records every 0.2 s for {SECONDS:.0f} s (per-token limit 16, body timeout 4 s)",
        "every steady request answered 200 within 2 s; the slow ones get 429 at once or 408 with the connection closed",
        written=len(latencies) * 10, archived=ok * 10, lost=(len(latencies) - ok) * 10,
        notes=f"steady: {ok}/{len(latencies)} × 200 < 2 s, worst {worst:.2f} s; slow uploads answered {statuses}; "
              f"archive rejected {rejected}"))
    assert ok == len(latencies) and len(latencies) >= 20
    assert set(statuses) <= {"429", "408"} and statuses.get("408", 0) >= 1 and statuses.get("429", 0) >= 1


SLOW_HEADS, HEADER_TIMEOUT, MARGIN = 200, 3.0, 2.5


def test_slowloris_heads_are_closed_and_huge_heads_refused(tmp_path, record_row):
    slow_token, steady_token = secrets.token_hex(16), secrets.token_hex(16)
    token_file = tmp_path / "tokens"
    token_file.write_text(f"{steady_token}\n{slow_token}\n")
    head = (f"POST /v1/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {slow_token}\r\n"
            f"Content-Type: {NDJSON}\r\nContent-Length: 100\r\n\r\n").encode()
    slow: list = []
    with running_archive(tmp_path / "archive", token_file,
                         extra_args=("--header-timeout", f"{HEADER_TIMEOUT:g}s")) as archive:
        trickle = threading.Thread(target=lambda: slow.extend(
            trickle_heads(archive.port, SLOW_HEADS, head, 0.25, HEADER_TIMEOUT + 10)), daemon=True)
        trickle.start()
        time.sleep(0.5)  # every connection is open and trickling
        latencies = _steady_ingest(archive.url, steady_token, 2 * HEADER_TIMEOUT)
        trickle.join(30)
        huge = oversized_head(archive.port, 1024 * 1024)
        moderate = {f"X-Trace-{i}": "t" * 200 for i in range(80)}  # ~17 KB of headers, under the 64 KiB default
        stored = httpx.post(f"{archive.url}/v1/ingest", timeout=10, content=json.dumps(
            {"msg": "moderate headers", "source_id": "moderate", "offset": 0}).encode(),
            headers={"Authorization": f"Bearer {steady_token}", "Content-Type": NDJSON, **moderate})
        rejected = archive_metrics(archive.url)
    statuses = {}
    for end in slow:
        statuses[end.status or "closed"] = statuses.get(end.status or "closed", 0) + 1
    closed_in = max(end.seconds for end in slow)
    worst = max(seconds for _, seconds in latencies)
    ok = sum(1 for status, seconds in latencies if status == 200 and seconds < 2.0)
    record_row(Row(
        "slowloris headers", f"{SLOW_HEADS} connections send an ingest head a byte every 0.25 s (header timeout "
        f"{HEADER_TIMEOUT:g} s) while another token posts 10 records every 0.2 s; then 1 MB of headers, then ~17 KB",
        "every slow connection answered 408 and closed within the timeout + 2.5 s; every steady request 200 within "
        "2 s; 1 MB of headers refused with 431; moderate headers stored",
        written=len(latencies) * 10, archived=ok * 10, lost=(len(latencies) - ok) * 10,
        notes=f"slow heads answered {statuses}, all closed within {closed_in:.1f} s of connecting; steady: "
              f"{ok}/{len(latencies)} × 200 < 2 s, worst {worst:.2f} s; 1 MB head → {huge}; ~17 KB head → "
              f"{stored.status_code}; archive rejected {rejected}"))
    assert statuses == {"408": SLOW_HEADS} and closed_in < HEADER_TIMEOUT + MARGIN
    assert ok == len(latencies) and len(latencies) >= 15
    assert huge == "431" and stored.status_code == 200 and stored.json()["accepted"] == 1
    assert rejected.get("header_timeout", 0) >= SLOW_HEADS and rejected.get("header_too_large", 0) >= 1


def archive_metrics(url: str) -> dict[str, float]:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    out = {}
    for line in text.splitlines():
        if line.startswith("ranklog_archive_rejected_requests_total{"):
            reason = line.split('reason="', 1)[1].split('"', 1)[0]
            out[reason] = float(line.rsplit(" ", 1)[1])
    return out
