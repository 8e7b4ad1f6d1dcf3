"""Hostile HTTP clients over real sockets: slowloris heads and oversized heads.

``trickle_body`` sends a head at once and then its body a little at a time. ``trickle_heads`` opens N connections and sends each one's request head a byte at a time (all from
one thread, round robin, so 200 connections cost no threads); it reports, per connection, what the
server answered and how long after connecting the server closed it. ``oversized_head`` sends a
head of a given size in pieces and returns the status line it got (it stops sending as soon as an
answer arrives, so a refusal mid-head is read before the server's close can reset the socket).
"""

from __future__ import annotations

import selectors
import socket
import time
from dataclasses import dataclass


@dataclass
class Ended:
    status: str  # the status code answered, "" for a close without an answer, "open" if never closed
    seconds: float  # from connecting to the server's close (or to the end of the trickle)


def _status(answer: bytes) -> str:
    line = answer.split(b"\r\n", 1)[0].decode(errors="replace")
    return line.split(" ")[1] if line.startswith("HTTP/") and " " in line else ""


def trickle_heads(port: int, count: int, head: bytes, interval: float, limit: float) -> list[Ended]:
    """Send `head` a byte per `interval` on each of `count` connections until the server closes each
    (or `limit` seconds pass)."""
    selector = selectors.DefaultSelector()
    state: dict[socket.socket, list] = {}  # sock -> [connected at, bytes sent, answer]
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.setblocking(False)
        state[sock] = [time.monotonic(), 0, b""]
        selector.register(sock, selectors.EVENT_READ)
    ended: list[Ended] = []
    started = time.monotonic()
    next_byte = started
    while state and time.monotonic() - started < limit:
        if time.monotonic() >= next_byte:
            for sock, entry in list(state.items()):
                if entry[1] < len(head):
                    try:
                        entry[1] += sock.send(head[entry[1]:entry[1] + 1])
                    except OSError:
                        pass  # reset by the server: the read below sees it
            next_byte += interval
        for key, _ in selector.select(timeout=max(0.0, min(0.05, next_byte - time.monotonic()))):
            sock = key.fileobj
            entry = state[sock]
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if data:
                entry[2] += data
                continue
            ended.append(Ended(_status(entry[2]), time.monotonic() - entry[0]))
            selector.unregister(sock)
            sock.close()
            del state[sock]
    for sock, entry in state.items():
        ended.append(Ended("open", time.monotonic() - entry[0]))
        sock.close()
    selector.close()
    return ended


def oversized_head(port: int, size: int, piece: int = 16 * 1024, path: bytes = b"/v1/ingest") -> str:
    """POST a head with about `size` bytes of header lines; the status answered, or "reset"/"closed"."""
    line = b"X-Padding: " + b"p" * (piece - 13) + b"\r\n"
    head = b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n" + line * max(1, size // piece) + b"\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.setblocking(False)
        answer, sent = b"", 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if sent < len(head):
                    sent += sock.send(head[sent:sent + piece])
                data = sock.recv(65536)
            except BlockingIOError:
                time.sleep(0.005)
                continue
            except OSError:
                return _status(answer) or "reset"
            if not data:
                return _status(answer) or "closed"
            answer += data
            if b"\r\n" in answer:
                return _status(answer)
    return "no answer"


def trickle_body(port: int, head: bytes, stop, piece: bytes = b"x" * 100, every: float = 0.3) -> str:
    """Send a request `head` at once, then its body `piece` by `piece` every `every` s until the server
    answers or closes (or `stop()` is true); the status line it answered ("no answer" otherwise)."""
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    except OSError as exc:
        return f"connect failed: {exc}"
    with sock:
        sock.sendall(head)
        sock.setblocking(False)
        answer = b""
        while not stop():
            try:
                sock.send(piece)
            except BlockingIOError:
                pass
            except OSError:
                break
            try:
                data = sock.recv(4096)
                if not data:
                    break
                answer += data
                if b"\r\n" in answer:
                    break
            except BlockingIOError:
                pass
            except OSError:
                break
            time.sleep(every)
        return answer.split(b"\r\n", 1)[0].decode(errors="replace") or "no answer"
