"""The agent's /metrics listener (ranklog.metrics_server) bounds its clients, over real sockets.

In this process with a 0.5 s header timeout: 200 slowloris connections are answered 408 and closed
within the timeout while scrapes keep getting 200; a silent connection is closed; heads past the
limit get 431; connections past ``max_connections`` are closed at once and the server recovers.
Then a real `ranklog agent` process: its /metrics refuses 1 MB of headers and still serves scrapes.
"""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest
from prometheus_client import CollectorRegistry, Counter

from ranklog.metrics_server import serve_metrics
from tests.helpers.agent_proc import running_agent
from tests.helpers.archive_proc import running_archive
from tests.helpers.net import free_port
from tests.helpers.slow_heads import oversized_head, trickle_heads

TIMEOUT = 0.5


@pytest.fixture
def metrics_server():
    registry = CollectorRegistry()
    Counter("ranklog_test_total", "a counter to scrape", registry=registry).inc()
    port = free_port()
    server = serve_metrics("127.0.0.1", port, registry, header_timeout=TIMEOUT, max_header_size=8192,
                           max_connections=210)
    yield port
    server.shutdown()
    server.server_close()


def _scrape(port: int) -> tuple[int, float]:
    started = time.monotonic()
    status = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).status_code
    return status, time.monotonic() - started


def test_slowloris_is_closed_while_scrapes_go_on(metrics_server):
    port = metrics_server
    ended: list = []
    trickle = threading.Thread(target=lambda: ended.extend(trickle_heads(
        port, 200, b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: abcdefghijklmnopqrstuvwxyz\r\n\r\n", 0.05, 10)))
    trickle.start()
    scrapes = []
    while trickle.is_alive():
        scrapes.append(_scrape(port))
        time.sleep(0.05)
    trickle.join()
    assert {e.status for e in ended} == {"408"} and len(ended) == 200
    assert max(e.seconds for e in ended) < TIMEOUT + 2.0
    assert scrapes and all(status == 200 and seconds < 2.0 for status, seconds in scrapes), scrapes


def test_silent_connection_is_closed_and_large_heads_get_431(metrics_server):
    port = metrics_server
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        started = time.monotonic()
        assert sock.recv(100) == b""
        assert time.monotonic() - started < TIMEOUT + 1.5
    assert oversized_head(port, 1024 * 1024, path=b"/metrics") == "431"  # one long line, past our budget
    assert oversized_head(port, 20 * 1024, piece=2048, path=b"/metrics") == "431"  # lines under 64 KiB each
    assert _scrape(port)[0] == 200


def test_connections_past_the_bound_are_shed():
    port = free_port()
    server = serve_metrics("127.0.0.1", port, CollectorRegistry(), header_timeout=2.0, max_connections=20)
    idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(40)]
    try:
        for sock in idle:
            sock.setblocking(False)
        closed: set[int] = set()
        deadline = time.monotonic() + 1.5
        while len(closed) < 20 and time.monotonic() < deadline:
            for n, sock in enumerate(idle):
                try:
                    if sock.recv(1) == b"":
                        closed.add(n)
                except BlockingIOError:
                    pass
                except OSError:
                    closed.add(n)
            time.sleep(0.02)
        assert len(closed) == 20  # the 20 past the bound, closed unanswered at once; 20 threads held
        time.sleep(2.5)  # the held ones time out and free their slots
        assert _scrape(port)[0] == 200
    finally:
        for sock in idle:
            sock.close()
        server.shutdown()
        server.server_close()


def test_the_agent_metrics_endpoint_refuses_huge_heads(tmp_path, token_file):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.log").write_text("hello\n")
    with running_archive(tmp_path / "archive", token_file) as archive, \
            running_agent([archive.url], token_file, tmp_path / "state", sources=[f"{logs}/*.log:text"]) as agent:
        assert oversized_head(agent.metrics_port, 1024 * 1024, path=b"/metrics") == "431"
        agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 1, 60, "a record shipped")
