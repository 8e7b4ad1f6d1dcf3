"""A read whose client hangs up stops and gives its slot back — on the Loki API and on ``/v1/query``,
before the first byte and while streaming — over real sockets (uvicorn on a loopback port, in this
process so the query's work can be made slow and observed).

The slow work is the engine's own scan and count slowed down for good: each batch takes 0.1 s and
passes the budget's check, as the engine's batches do (``ranklog.query.engine``), and none ever ends
by itself. Four clients take every slot and hang up; a fifth must then be answered — which only the
cancellation can make room for — and every slow scan must have ended cancelled or closed.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from ranklog.archive.loki.routes import LokiAPI
from ranklog.archive.query_api import QueryEndpoint
from ranklog.query import budget, engine
from tests.helpers.net import free_port
from tests.helpers.query_data import write_archive

SLOTS = 4
AUTH = {"Authorization": "Bearer t"}


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    from tests.archive.conftest import PAST_NS
    from tests.helpers.corpus import generate

    path = tmp_path_factory.mktemp("cancel") / "archive"
    write_archive(generate(2000, start_ns=PAST_NS, span_s=600, hosts=1, ranks_per_host=2, seed=3), path)
    return str(path)


@pytest.fixture
def slow_scans(monkeypatch) -> list[str]:
    """The engine's scans and counts made slow (0.1 s a batch, forever) — but for a probe's (limit 1);
    records how each slow one ended."""
    ended: list[str] = []
    real_scan, real_count = engine.scan, engine.count

    def count(source, spec) -> int:
        if spec.limit == 1:
            return real_count(source, spec)
        try:
            while True:
                time.sleep(0.1)
                budget.check()
        except budget.QueryAborted as exc:
            ended.append(type(exc).__name__)
            raise

    def scan(source, spec, columns=None) -> Iterator:
        if spec.limit == 1:
            yield from real_scan(source, spec, columns)
            return
        batch = next(real_scan(source, spec, columns), None)
        try:
            while True:
                time.sleep(0.1)
                budget.check()
                if batch is not None:
                    yield batch
        except budget.QueryAborted as exc:
            ended.append(type(exc).__name__)
            raise
        except GeneratorExit:
            ended.append("closed")
            raise

    monkeypatch.setattr(engine, "scan", scan)
    monkeypatch.setattr(engine, "count", count)
    return ended


@pytest.fixture
def server(root):
    def authorize(request):
        if request.headers.get("authorization") == AUTH["Authorization"]:
            return None
        return JSONResponse({"error": "missing or invalid bearer token"}, status_code=401)

    query = QueryEndpoint(lambda _: root, authorize)
    app = Starlette(routes=[Route("/v1/query", query.handle, methods=["GET", "POST"]),
                            *LokiAPI(lambda _: root, authorize).routes()])
    port = free_port()
    instance = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", loop="asyncio"))
    thread = threading.Thread(target=instance.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not instance.started:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    yield port
    instance.should_exit = True
    thread.join(10)


def _hang_up(port: int, target: str, read_first: bool, when: threading.Event) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: {AUTH['Authorization']}\r\n\r\n"
                     .encode())
        if read_first:
            sock.recv(1024)  # the answer has begun streaming
        when.wait(20)


@pytest.mark.parametrize(("target", "probe", "streaming"), [
    ('/loki/api/v1/query_range?query={job=~".%2B"}&limit=5000&start=0', "/loki/api/v1/query?query=vector(1)", False),
    ("/v1/query?columns=ts,msg&format=ndjson", "/v1/query?count=true&limit=1", True),
    ("/v1/query?count=true", "/v1/query?count=true&limit=1", False),
])
def test_hung_up_queries_give_their_slots_back(server, slow_scans, target, probe, streaming):
    hang_up = threading.Event()
    hangers = [threading.Thread(target=_hang_up, args=(server, target, streaming, hang_up)) for _ in range(SLOTS)]
    for thread in hangers:
        thread.start()
    busy, started = None, time.monotonic()
    while busy != 429 and time.monotonic() - started < 15:  # until the four hold every slot
        busy = httpx.get(f"http://127.0.0.1:{server}{probe}", headers=AUTH, timeout=30).status_code
    hang_up.set()
    for thread in hangers:
        thread.join()
    hung_up, status = time.monotonic(), None
    while time.monotonic() - hung_up < 15:  # the slow scans never end by themselves: only cancelling frees them
        status = httpx.get(f"http://127.0.0.1:{server}{probe}", headers=AUTH, timeout=30).status_code
        if status != 429:
            break
        time.sleep(0.05)
    freed = time.monotonic() - hung_up
    assert busy == 429 and status == 200, (busy, status, freed)
    time.sleep(0.3)
    assert len(slow_scans) >= SLOTS and set(slow_scans) <= {"QueryCancelled", "closed"}, slow_scans
