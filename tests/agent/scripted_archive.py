"""A real HTTP server standing in for the archive when a test needs scripted answers (429, 401, 413…).

It speaks the ingest contract (POST /v1/ingest, Arrow IPC stream, bearer token) and records what it
received, decoded, so shipping behaviour can be tested against exact status sequences that the
real archive only produces under real pressure. Tests that need durability use the real archive.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pyarrow as pa
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.helpers.net import free_port, wait_for_port


@dataclass
class Received:
    status: int
    rows: int
    auth: str
    content_type: str
    at: float


@dataclass
class ScriptedArchive:
    port: int
    script: list[tuple[int, dict[str, str]]] = field(default_factory=list)  # answers before the default 200
    max_rows: int | None = None  # answer 413 to bodies with more rows
    refuse: Callable[[dict], bool] | None = None  # answer 400 to bodies holding a row (as a dict) it picks
    received: list[Received] = field(default_factory=list)
    tables: list[pa.Table] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def accepted_rows(self) -> int:
        return sum(r.rows for r in self.received if r.status == 200)

    async def ingest(self, request: Request) -> Response:
        body = await request.body()
        table = pa.ipc.open_stream(body).read_all()
        status, headers = self.script.pop(0) if self.script else (200, {})
        if status == 200 and self.max_rows is not None and table.num_rows > self.max_rows:
            status, headers = 413, {}
        if status == 200 and self.refuse is not None and any(map(self.refuse, table.drop_columns(["ts"]).to_pylist())):
            status, headers = 400, {}
        self.received.append(Received(status, table.num_rows, request.headers.get("authorization", ""),
                                      request.headers.get("content-type", ""), time.monotonic()))
        if status == 200:
            self.tables.append(table)
        return Response(status_code=status, headers=headers)


@contextmanager
def scripted_archive(script=(), max_rows: int | None = None,
                     refuse: Callable[[dict], bool] | None = None) -> Iterator[ScriptedArchive]:
    archive = ScriptedArchive(free_port(), list(script), max_rows, refuse)
    app = Starlette(routes=[Route("/v1/ingest", archive.ingest, methods=["POST"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=archive.port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for_port(archive.port)
        yield archive
    finally:
        server.should_exit = True
        thread.join(10)
