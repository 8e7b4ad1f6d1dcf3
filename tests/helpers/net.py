"""Loopback-only networking helpers for tests: free ports, waiting for a listener or a condition,
serving a handler."""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_HANDED_OUT: set[int] = set()  # never the same port twice from one test process
_SPAN = 12000  # how many ports below the ephemeral range are drawn from


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on `host` right now, drawn at random *below* the kernel's ephemeral
    range (``net.ipv4.ip_local_port_range``). ``bind(("", 0))`` answers from inside that range, where
    any outgoing connection can take the port as its source port before the server binds it: a clean
    run saw SeaweedFS's filer and a Prometheus both die of "address already in use" that way."""
    low = _ephemeral_low()
    candidates = range(max(1024, low - _SPAN), low)
    for _ in range(200):
        port = random.choice(candidates) if len(candidates) > 1 else 0
        if port in _HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            port = sock.getsockname()[1]
        _HANDED_OUT.add(port)
        return port
    raise RuntimeError(f"no free port on {host} below {low} after 200 tries")


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def wait_for_port(port: int, host: str = "127.0.0.1", timeout: float = 20.0, process=None) -> None:
    """Block until something accepts connections on host:port; fail early if `process` exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before listening on {host}:{port}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout}s")


def wait_until(condition: Callable[[], object], timeout: float, what: str, interval: float = 0.25):
    """`condition()`'s first truthy value, polled every `interval`; TimeoutError naming `what`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(interval)
    raise TimeoutError(f"{what}: not reached within {timeout}s")


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler], port: int, name: str = "http") -> Iterator[None]:
    """`handler` answering on 127.0.0.1:`port` from a thread, shut down on exit."""
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, name=name, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()

