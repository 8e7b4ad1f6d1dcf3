"""A minimal archive front serving only the read side over a root (a real uvicorn process): ``/v1/query``
and the Loki API (``/loki/api/v1/…``).

``python -m tests.helpers.query_server ROOT TOKEN_FILE PORT [MAX_ROWS]`` — used by the query tests
to exercise the remote client against the real endpoint module without the ingest side, and by
``bench_loki_api.py`` to time the Loki API over the benchmark's archive without an ingest pipeline
(and its retention) touching it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.helpers.net import free_port, wait_for_port
from tests.helpers.procs import REPO, spawn, stop


def _serve(root: str, token_file: str, port: int, max_rows: int) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse

    from ranklog.archive.auth import TokenStore
    from ranklog.archive.loki.routes import LokiAPI
    from ranklog.archive.query_api import QueryLimits, query_route

    tokens = TokenStore(token_file)
    route = query_route(root, lambda request: tokens.check(request.headers.get("authorization")),
                        QueryLimits(max_rows=max_rows))

    def authorize(request):
        if tokens.check(request.headers.get("authorization")):
            return None
        return JSONResponse({"error": "missing or invalid bearer token"}, status_code=401)

    loki = LokiAPI(lambda _: root, authorize).routes()
    uvicorn.run(Starlette(routes=[route, *loki]), host="127.0.0.1", port=port, log_level="warning")


@contextlib.contextmanager
def running_query_server(root: Path, token_file: Path, log_path: Path, max_rows: int = 1_000_000) -> Iterator[str]:
    """Start the server on a free loopback port; yields its base URL; always stops it."""
    port = free_port()
    proc = spawn([sys.executable, "-m", "tests.helpers.query_server", str(root), str(token_file), str(port),
                  str(max_rows)], log_path=log_path, cwd=REPO)
    try:
        wait_for_port(port, process=proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 1_000_000)
