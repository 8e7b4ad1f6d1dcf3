"""A real HTTP proxy in front of a real archive that refuses (400) every Arrow body holding a record it
picks, and forwards everything else unchanged: how a reliability test gets "an archive that refuses
one specific record" (the archive itself keeps any value; a proxy, a WAF or a future schema rule may not).
While `closed` it answers every body 429 (Retry-After: 1) without forwarding it: a gate that holds an
agent's first sends back until a test has set the stage.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx
import pyarrow as pa
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.helpers.net import free_port, wait_for_port


@dataclass
class RefusingProxy:
    port: int
    upstream: str
    refuse: Callable[[dict], bool]
    refused: int = 0  # requests answered 400
    forwarded: int = 0
    closed: bool = False  # answer 429 to everything (nothing reaches the archive)
    _client: httpx.AsyncClient = field(default_factory=lambda: httpx.AsyncClient(timeout=60))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def ingest(self, request: Request) -> Response:
        body = await request.body()
        if self.closed:
            return JSONResponse({"error": "proxy gate closed"}, status_code=429, headers={"Retry-After": "1"})
        table = pa.ipc.open_stream(body).read_all()
        if any(map(self.refuse, table.drop_columns(["ts"]).to_pylist())):
            self.refused += 1
            return JSONResponse({"error": "proxy policy: this record may not be stored"}, status_code=400)
        self.forwarded += 1
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("authorization", "content-type")}
        answer = await self._client.post(f"{self.upstream}/v1/ingest", content=body, headers=headers)
        return Response(answer.content, status_code=answer.status_code, media_type="application/json")


@contextmanager
def refusing_proxy(upstream: str, refuse: Callable[[dict], bool], closed: bool = False) -> Iterator[RefusingProxy]:
    proxy = RefusingProxy(free_port(), upstream, refuse, closed=closed)
    app = Starlette(routes=[Route("/v1/ingest", proxy.ingest, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=proxy.port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for_port(proxy.port)
        yield proxy
    finally:
        server.should_exit = True
        thread.join(10)
