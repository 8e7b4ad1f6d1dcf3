"""The /metrics listener of `ranklog agent` and `ranklog run --monitoring-port`, with bounded clients.

prometheus-client's ``start_http_server`` runs one thread per connection and reads a request head
with no timeout at all: a client that connects and sends nothing, or trickles its headers a byte
at a time (slowloris), holds a thread for ever, and up to 100 header lines of 64 KiB each are
accepted. This server serves the same WSGI app (``make_wsgi_app``) on the same stdlib threading
server, with the limits the archive's listener has (ranklog.archive.http_limits):

- the request head must be complete within ``header_timeout`` of the connection being accepted:
  otherwise 408 if any byte came (a silent connection is just closed);
- a head past ``max_header_size`` bytes gets 431;
- beyond ``max_connections`` (256) connections at once, a new one is closed unanswered, so a flood
  cannot grow threads without bound; the bound is high enough that 200 slowloris connections still
  leave room for Prometheus (one connection per scrape).

The connection is closed after every answer (wsgiref speaks HTTP/1.0), so one head per connection.
"""

from __future__ import annotations

import io
import socket
import threading
import time
from http import HTTPStatus
from wsgiref.simple_server import WSGIRequestHandler

from prometheus_client import make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

HEADER_TIMEOUT = 10.0
MAX_HEADER_SIZE = 64 * 1024
MAX_CONNECTIONS = 256
LINGER = 1.0  # seconds a refused client may still send before the close


class _HeadTimeout(Exception):
    pass


class _HeadTooLarge(Exception):
    pass


class _HeadReader(io.RawIOBase):
    """Socket reads sharing one deadline and one byte budget: the request head's."""

    def __init__(self, sock: socket.socket, deadline: float, budget: int) -> None:
        super().__init__()
        self._sock = sock
        self._deadline = deadline
        self._budget = budget
        self.received = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.received > self._budget:
            raise _HeadTooLarge
        remaining = self._deadline - time.monotonic()
        self._sock.settimeout(max(remaining, 0.0))  # past the deadline: only what is already here
        try:
            n = self._sock.recv_into(buffer)
        except (TimeoutError, BlockingIOError):
            raise _HeadTimeout from None
        self.received += n
        if remaining <= 0 and n:
            raise _HeadTimeout
        return n


class _Handler(WSGIRequestHandler):
    header_timeout = HEADER_TIMEOUT
    max_header_size = MAX_HEADER_SIZE
    timeout = HEADER_TIMEOUT  # socket timeout for writing the answer (StreamRequestHandler.setup sets it)

    def setup(self) -> None:
        super().setup()
        # The deadline runs from the accept, not from when this thread got going (under load, later).
        accepted = self.server.accepted_at.pop(self.request, time.monotonic())
        self._reader = _HeadReader(self.connection, accepted + self.header_timeout, self.max_header_size)
        self.rfile = io.BufferedReader(self._reader)

    def handle(self) -> None:
        try:
            super().handle()
        except _HeadTimeout:
            if self._reader.received:
                self._refuse(HTTPStatus.REQUEST_TIMEOUT, f"request head not received within {self.header_timeout:g}s")
        except _HeadTooLarge:
            self._refuse(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                         f"request head exceeds {self.max_header_size} bytes")
        except OSError:  # the client went away or stopped reading: nothing to answer
            self.close_connection = True

    def parse_request(self) -> bool:
        ok = super().parse_request()
        self.connection.settimeout(self.timeout)  # the head is in: writes get the plain timeout again
        return ok

    def _refuse(self, status: HTTPStatus, message: str) -> None:
        """Answer, then a lingering close: closing with unread input sends a reset that can destroy the
        answer before the client reads it, so read and drop what still comes for up to LINGER seconds."""
        body = message.encode()
        self.close_connection = True
        try:
            self.connection.settimeout(LINGER)
            self.connection.sendall(f"HTTP/1.0 {status.value} {status.phrase}\r\nContent-Type: text/plain\r\n"
                                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
            self.connection.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + LINGER
            while time.monotonic() < deadline:
                self.connection.settimeout(max(0.01, deadline - time.monotonic()))
                if not self.connection.recv(65536):
                    break
        except OSError:
            pass

    def log_message(self, format: str, *args) -> None:
        """Log nothing (a scrape every few seconds)."""


class _BoundedServer(ThreadingWSGIServer):
    max_connections = MAX_CONNECTIONS
    # socketserver's 5 overflows while a burst of connections is accepted (one thread started per accept):
    # the kernel then drops their packets, a scrape's too, and they stall in TCP retransmission.
    request_queue_size = 1024

    def server_activate(self) -> None:
        super().server_activate()
        self._slots = threading.BoundedSemaphore(self.max_connections)
        self.accepted_at: dict[socket.socket, float] = {}

    def process_request(self, request, client_address) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        self.accepted_at[request] = time.monotonic()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.accepted_at.pop(request, None)
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def serve_metrics(host: str, port: int, registry, header_timeout: float = HEADER_TIMEOUT,
                  max_header_size: int = MAX_HEADER_SIZE, max_connections: int = MAX_CONNECTIONS) -> _BoundedServer:
    """Serve `registry` on host:port from a daemon thread; stop with ``.shutdown()`` and ``.server_close()``."""
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    handler = type("MetricsHandler", (_Handler,), {
        "header_timeout": header_timeout, "max_header_size": max_header_size, "timeout": header_timeout})
    server_class = type("MetricsServer", (_BoundedServer,), {
        "address_family": family, "max_connections": max_connections})
    server = server_class((address[0], port), handler)
    server.set_app(make_wsgi_app(registry))
    threading.Thread(target=server.serve_forever, name="ranklog-metrics-http", daemon=True).start()
    return server
