"""A fault-injecting HTTP proxy in front of an S3 server (loopback only), for object-store fault rows.

    with fault_proxy(seaweedfs.endpoint) as proxy:      # point the archive at proxy.endpoint
        proxy.error_rate = 0.5                          # half the requests answer 503 SlowDown
        proxy.delay = 3.0                               # every answer waits 3 s first

Requests are forwarded unchanged (method, path, query, headers including ``Host``, body), so the
client's SigV4 signature still verifies at the server. A 503 carries S3's own error document
(`SlowDown`), as AWS sends under throttling; the faulted request never reaches the server.
Counters say how many requests passed, failed and were delayed.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from tests.helpers.net import free_port, wait_for_port

SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


@dataclass
class FaultProxy:
    upstream: str
    port: int = field(default_factory=free_port)
    error_rate: float = 0.0
    delay: float = 0.0
    counts: dict[str, int] = field(default_factory=lambda: {"forwarded": 0, "failed": 0, "delayed": 0})
    _random: random.Random = field(default_factory=lambda: random.Random(18))

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def app(self):
        import httpx
        from starlette.requests import Request
        from starlette.responses import Response

        client = httpx.AsyncClient(base_url=self.upstream, timeout=120)

        async def handle(scope, receive, send) -> None:
            if scope["type"] != "http":
                return
            request = Request(scope, receive)
            body = await request.body()
            if self.delay:
                self.counts["delayed"] += 1
                await asyncio.sleep(self.delay)
            if self.error_rate and self._random.random() < self.error_rate:
                self.counts["failed"] += 1
                answer = Response(SLOW_DOWN, status_code=503, media_type="application/xml")
            else:
                self.counts["forwarded"] += 1
                headers = [(k, v) for k, v in request.headers.raw if k.decode().lower() not in HOP_BY_HOP]
                upstream = await client.request(request.method, request.url.path + (
                    "?" + request.url.query if request.url.query else ""), headers=headers, content=body)
                answer = Response(upstream.content, status_code=upstream.status_code,
                                  headers={k: v for k, v in upstream.headers.items()
                                           if k.lower() not in HOP_BY_HOP | {"content-length", "content-encoding"}})
            await answer(scope, receive, send)

        return handle


@contextlib.contextmanager
def fault_proxy(upstream: str) -> Iterator[FaultProxy]:
    """The proxy served by uvicorn in a thread of this process (stopped on exit)."""
    import uvicorn

    proxy = FaultProxy(upstream)
    server = uvicorn.Server(uvicorn.Config(proxy.app(), host="127.0.0.1", port=proxy.port, log_level="warning",
                                           lifespan="off", access_log=False))
    thread = threading.Thread(target=server.run, name="s3-fault-proxy", daemon=True)
    thread.start()
    try:
        wait_for_port(proxy.port)
        yield proxy
    finally:
        server.should_exit = True
        deadline = time.monotonic() + 10
        while thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
