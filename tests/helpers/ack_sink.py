"""An ingest endpoint that acknowledges every request at once, so a benchmark measures the agent alone.

    python -m tests.helpers.ack_sink PORT

HTTP/1.1 with keep-alive on 127.0.0.1:PORT: every ``POST`` body is read to its end and answered
``200 {}``; nothing is decoded or stored (the archive's work is what this stands in for). Prints
``listening`` when ready.
"""

from __future__ import annotations

import asyncio
import sys

_ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if length:
                await reader.readexactly(length)
            writer.write(_ANSWER)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(port: int) -> None:
    server = await asyncio.start_server(_serve, "127.0.0.1", port, limit=1 << 20)
    print("listening", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
