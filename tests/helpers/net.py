"""Loopback-only networking helpers for tests: free ports and waiting for a listener."""

from __future__ import annotations

import socket
import time


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on `host` right now (bind to port 0 and let the kernel choose)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


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
