"""An ingest endpoint that acknowledges every request at once, so a benchmark measures the agent alone.

    python -m tests.helpers.ack_sink PORT

HTTP/1.1 with keep-alive on 127.0.0.1:PORT: every ``POST`` body is read to its end and answered
``200 {}``; nothing is decoded or stored (the archive's work is what this stands in for). Prints
``listening`` when ready.

It stands in for nothing, so it should cost next to nothing: one thread per connection receives into
one reused buffer (``recv_into``) and only looks at the header block. The asyncio version it
replaced built a new bytes object per read and took 0.09 CPU-µs per shipped line — 4% of the two
cores the agent's 2-worker run is measured on, taken from the agent it is meant not to disturb.
"""

from __future__ import annotations

import socket
import sys
import threading

_ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
_BUFFER = 1 << 20


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def _serve(conn: socket.socket) -> None:
    buffer = bytearray(_BUFFER)
    view = memoryview(buffer)
    held = 0  # bytes of buffer[:held] received and not yet consumed
    with conn:
        while True:
            end = buffer.find(b"\r\n\r\n", 0, held)
            while end < 0:
                if held == len(buffer):
                    return  # a header block over 1 MiB: not a client of this sink
                got = conn.recv_into(view[held:])
                if not got:
                    return
                held += got
                end = buffer.find(b"\r\n\r\n", 0, held)
            end += 4
            body = _content_length(bytes(view[:end]))
            taken = min(body, held - end)  # body bytes already in the buffer
            rest = held - end - taken  # bytes of the next request, pipelined
            view[:rest] = view[end + taken:held]
            held = rest
            body -= taken  # more body to come only when none of the next request is here: held == 0
            while body:
                got = conn.recv_into(view, min(body, len(buffer)))  # received and dropped
                if not got:
                    return
                body -= got
            conn.sendall(_ANSWER)


def main(port: int) -> None:
    server = socket.create_server(("127.0.0.1", port), backlog=64)
    print("listening", flush=True)
    while True:
        conn, _ = server.accept()
        threading.Thread(target=_serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main(int(sys.argv[1]))
