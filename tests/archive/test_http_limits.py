"""The archive listener's header limits (ranklog.archive.http_limits), edge by edge, over real sockets.

uvicorn with the guarded httptools protocol serves a one-route app in a thread of this process, with
a 0.5 s header timeout and an 8 KiB header limit, so each case takes well under a second. The whole
archive process under 200 slowloris connections is tests/reliability/test_slow_clients.py.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from ranklog.archive.archive_config import ArchiveConfig
from ranklog.archive.http_limits import guarded_protocol
from tests.helpers.net import free_port
from tests.helpers.slow_heads import oversized_head, trickle_heads

TIMEOUT, LIMIT = 0.5, 8 * 1024


async def _echo(request):
    body = await request.body()
    return PlainTextResponse(f"{len(body)} {len(request.headers)}")


@pytest.fixture(scope="module")
def server():
    refused: Counter[str] = Counter()
    port = free_port()
    app = Starlette(routes=[Route("/", _echo, methods=["GET", "POST"])])
    instance = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, loop="uvloop", lifespan="off",
                                             log_level="warning", http=guarded_protocol(TIMEOUT, LIMIT, lambda reason: refused.update([reason]))))
    thread = threading.Thread(target=instance.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not instance.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert instance.started
    yield port, refused
    instance.should_exit = True
    thread.join(10)


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _answer(sock: socket.socket) -> bytes:
    """Everything until the server closes (or 5 s)."""
    out = b""
    while True:
        try:
            data = sock.recv(65536)
        except (TimeoutError, ConnectionResetError):
            return out
        if not data:
            return out
        out += data


def _one_response(sock: socket.socket) -> bytes:
    out = b""
    while b"\r\n\r\n" not in out:
        out += sock.recv(65536)
    head, _, body = out.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(body) < length:
        body += sock.recv(65536)
    return head.split(b"\r\n", 1)[0] + b" " + body


def test_moderate_headers_and_keep_alive_work(server):
    port, _ = server
    headers = b"".join(b"X-Header-%d: %s\r\n" % (i, b"v" * 100) for i in range(60))  # ~7 KB, under the limit
    with _connect(port) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n")
        assert _one_response(sock) == b"HTTP/1.1 200 OK 0 61"
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")  # the same connection again
        assert _one_response(sock) == b"HTTP/1.1 200 OK 3 2"


def test_pipelined_requests_are_answered_in_order(server):
    port, _ = server
    with _connect(port) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\na"
                     b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nbc")
        answers = b""
        while answers.count(b"HTTP/1.1 200 OK") < 2 or not answers.endswith(b"2 2"):
            answers += sock.recv(65536)
        first, second = answers.split(b"HTTP/1.1 200 OK")[1:]
        assert first.endswith(b"\r\n\r\n1 2") and second.endswith(b"\r\n\r\n2 2")


def test_a_slow_body_is_not_a_slow_head(server):
    port, _ = server
    with _connect(port) as sock:
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\na")
        time.sleep(TIMEOUT * 2)
        sock.sendall(b"bc")
        assert _one_response(sock) == b"HTTP/1.1 200 OK 3 2"


def test_slow_heads_get_408_and_silent_connections_are_closed(server):
    port, refused = server
    before = refused["header_timeout"]
    ended = trickle_heads(port, 5, b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: abcdefghijklmnop\r\n\r\n", 0.1, 5.0)
    assert [e.status for e in ended] == ["408"] * 5
    assert all(TIMEOUT - 0.05 <= e.seconds < TIMEOUT + 1.5 for e in ended), ended  # (timed from accept)
    with _connect(port) as sock:  # connects and says nothing: closed without an answer
        started = time.monotonic()
        assert _answer(sock) == b""
        assert time.monotonic() - started < TIMEOUT + 1.5
    assert refused["header_timeout"] == before + 6


def test_the_next_head_on_a_kept_alive_connection_is_timed_too(server):
    port, _ = server
    with _connect(port) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _one_response(sock).startswith(b"HTTP/1.1 200")
        sock.sendall(b"G")  # one byte of the next request is enough to be owed an answer
        started = time.monotonic()
        assert _answer(sock).startswith(b"HTTP/1.1 408 Request Timeout\r\n")
        assert time.monotonic() - started < TIMEOUT + 1.5


@pytest.mark.parametrize("shape", ["one long header", "many headers", "a long target"])
def test_heads_past_the_limit_get_431(server, shape):
    port, refused = server
    before = refused["header_too_large"]
    if shape == "one long header":
        status = oversized_head(port, 1024 * 1024, path=b"/")
    else:
        head = (b"GET / HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: %s\r\n" % (i, b"v" * 50) for i in range(200))
                if shape == "many headers" else b"GET /" + b"a" * (LIMIT + 10) + b" HTTP/1.1\r\nHost: x\r\n")
        with _connect(port) as sock:  # complete heads in one write: counted as parsed, not as received
            sock.sendall(head + b"\r\n")
            status = _answer(sock).split(b" ", 2)[1].decode()
    assert status == "431"
    assert refused["header_too_large"] == before + 1


@pytest.mark.parametrize(("key", "value", "message"), [
    ("header_timeout", 0.0, "header_timeout: must be positive"),
    ("body_timeout", -1.0, "body_timeout: must be positive"),
    ("max_header_size", 100, "max_header_size: 100 is below 1 KiB"),
])
def test_bad_limits_name_the_key(tmp_path, key, value, message):
    config = ArchiveConfig(root=str(tmp_path), token_file=str(tmp_path / "tokens"), **{key: value})
    with pytest.raises(ValueError, match=message):
        config.validate()
