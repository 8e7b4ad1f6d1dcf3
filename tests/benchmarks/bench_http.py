"""HTTP layer benchmark: what the archive's header limits cost, next to uvicorn's parsers.

    python tests/benchmarks/bench_http.py [--quick] [--runs K]

The archive needs a header read timeout and a header size limit (slowloris, huge heads). uvicorn
offers a size limit only with its pure-Python h11 parser (``h11_max_incomplete_event_size``, and
no timeout there either), so ranklog guards uvicorn's httptools protocol instead
(ranklog.archive.http_limits). This measures the choice: the same Starlette app as the archive's
ingest (bearer header, the body read as a stream, a small JSON answer), served by a real uvicorn
process on uvloop with

- ``httptools``: uvicorn's fast parser, unguarded (the archive before the limits),
- ``httptools + guard``: what the archive runs,
- ``h11 + size limit``: the alternative with a built-in size limit,

posted by 4 concurrent clients: ingest-sized bodies (2.5 MB, about one 64k-row Arrow request) and
small ones (2 KB, an agent's trickle). Server CPU per request comes from /proc; requests/s is
wall-clock. Both move with the machine's load (a shared 2-core machine shifts them by ±10 %), so
the guard's own cost is also measured where load cannot hide it: the same small request fed
20,000 times through each protocol class in this process (a no-op ASGI app, an in-memory transport),
the two classes interleaved 7 times; the target is on that difference. Medians throughout.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "exporters"))


from tests.helpers.archive_proc import post_concurrently  # noqa: E402
from tests.helpers.net import free_port, wait_for_port  # noqa: E402
from tests.helpers.procs import process_cpu_seconds, spawn, stop  # noqa: E402

VARIANTS = ("httptools", "httptools + guard", "h11 + size limit")
CLIENTS = 4
LARGE, SMALL = 2_500_000, 2_000
TARGET_GUARD_US = 5.0  # the guard may add at most this much CPU per request to uvicorn's httptools protocol


def _serve(variant: str, port: int) -> None:
    """The server process: an ingest-shaped Starlette app on uvicorn with the variant's protocol."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from ranklog.archive.http_limits import guarded_protocol

    async def ingest(request: Request) -> JSONResponse:
        if not request.headers.get("authorization", "").startswith("Bearer "):
            return JSONResponse({"error": "missing or invalid bearer token"}, status_code=401)
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
        return JSONResponse({"accepted": size, "duplicates": 0})

    http: object = {"httptools": "httptools", "h11 + size limit": "h11"}.get(variant)
    if variant == "httptools + guard":
        http = guarded_protocol(10.0, 64 * 1024, lambda reason: None)
    uvicorn.run(Starlette(routes=[Route("/v1/ingest", ingest, methods=["POST"])]), host="127.0.0.1", port=port,
                loop="uvloop", http=http, lifespan="off", log_level="warning", access_log=False,
                h11_max_incomplete_event_size=64 * 1024)


@contextlib.contextmanager
def _server(variant: str) -> Iterator[tuple[str, int]]:
    port = free_port()
    env = {"PYTHONPATH": os.pathsep.join([str(REPO / "exporters"), str(REPO)])}
    proc = spawn([sys.executable, str(Path(__file__).resolve()), "--serve", variant, "--port", str(port)], env=env)
    try:
        wait_for_port(port, process=proc)
        yield f"http://127.0.0.1:{port}", proc.pid
    finally:
        stop(proc)


HEADERS = {"Authorization": "Bearer " + "t" * 32, "Content-Type": "application/vnd.apache.arrow.stream"}


def run(variant: str, body: bytes, count: int) -> dict[str, float]:
    """One fresh server: a warm-up round, then `count` posts of `body`; rates and server CPU."""
    with _server(variant) as (url, pid):
        post_concurrently(url, HEADERS, [body] * max(CLIENTS, count // 10), CLIENTS, timeout=60)
        cpu = process_cpu_seconds(pid)
        started = time.perf_counter()
        post_concurrently(url, HEADERS, [body] * count, CLIENTS, timeout=60)
        wall = time.perf_counter() - started
        cpu = process_cpu_seconds(pid) - cpu
    return {"rps": count / wall, "mbps": count * len(body) / wall / 1e6, "cpu_us": cpu / count * 1e6}


def _protocol_cost(protocol: type, requests: int) -> float:
    """CPU µs per request of `protocol` alone: one kept-alive connection over an in-memory transport,
    a no-op ASGI app, the same small request each time (the loop runs until each response is sent)."""
    import asyncio

    from uvicorn.config import Config
    from uvicorn.server import ServerState

    class Transport(asyncio.Transport):
        def __init__(self) -> None:
            super().__init__()
            self.closing = False

        def write(self, data: bytes) -> None:
            pass

        def is_closing(self) -> bool:
            return self.closing

        def close(self) -> None:
            self.closing = True

        def get_extra_info(self, name: str, default=None):
            return {"sockname": ("127.0.0.1", 8470), "peername": ("127.0.0.1", 40000)}.get(name, default)

        def pause_reading(self) -> None:
            pass

        def resume_reading(self) -> None:
            pass

    async def app(scope, receive, send) -> None:
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"{}"})

    request = (b"POST /v1/ingest HTTP/1.1\r\nHost: 127.0.0.1:8470\r\nAccept: */*\r\nAccept-Encoding: gzip, deflate\r\n"
               b"Connection: keep-alive\r\nUser-Agent: python-httpx/0.28\r\nAuthorization: Bearer " + b"t" * 32 +
               b"\r\nContent-Type: application/x-ndjson\r\nContent-Length: %d\r\n\r\n" % SMALL + b"x" * SMALL)

    async def feed() -> float:
        config = Config(app, lifespan="off", log_level="warning")
        config.load()
        connection = protocol(config=config, server_state=ServerState(), app_state={})
        connection.connection_made(Transport())
        started = time.process_time()
        for _ in range(requests):
            connection.data_received(request)
            while connection.cycle is None or not connection.cycle.response_complete:
                await asyncio.sleep(0)
        return (time.process_time() - started) / requests * 1e6

    import uvloop

    return uvloop.run(feed())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few requests, one run (smoke test, < 30 s)")
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--serve", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(args.serve, args.port)
        return 0
    runs = args.runs or (1 if args.quick else 5)
    sizes = {"ingest-sized (2.5 MB)": (os.urandom(LARGE), 40 if args.quick else 200),
             "small (2 KB)": (os.urandom(SMALL), 400 if args.quick else 4000)}
    results = {(label, variant): [] for label in sizes for variant in VARIANTS}
    for _ in range(runs):
        for label, (body, count) in sizes.items():
            for variant in VARIANTS:
                results[label, variant].append(run(variant, body, count))
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from ranklog.archive.http_limits import guarded_protocol

    guarded = guarded_protocol(10.0, 64 * 1024, lambda reason: None)
    alone: list[float] = []
    with_guard: list[float] = []
    for _ in range(3 if args.quick else 7):
        alone.append(_protocol_cost(HttpToolsProtocol, 2_000 if args.quick else 20_000))
        with_guard.append(_protocol_cost(guarded, 2_000 if args.quick else 20_000))

    def med(label: str, variant: str, key: str) -> float:
        return statistics.median(r[key] for r in results[label, variant])

    load = os.getloadavg()[0]
    print(f"HTTP layer: uvicorn + uvloop + Starlette, {CLIENTS} clients, median of {runs} run(s); "
          f"load average {load:.1f} on {os.cpu_count()} cores")
    print()
    print(f"{'bodies':<24}{'protocol':<20}{'requests/s':>12}{'MB/s':>10}{'server CPU µs/req':>20}{'vs httptools':>14}")
    print("─" * 100)
    for label in sizes:
        base = med(label, "httptools", "cpu_us")
        for variant in VARIANTS:
            cpu = med(label, variant, "cpu_us")
            print(f"{label:<24}{variant:<20}{med(label, variant, 'rps'):>12,.0f}{med(label, variant, 'mbps'):>10,.0f}"
                  f"{cpu:>20,.1f}{cpu / base:>13.2f}x")
    print()
    base, guard = statistics.median(alone), statistics.median(with_guard)
    print(f"{'protocol alone, small request, in process':<44}{'CPU µs/req':>12}")
    print("─" * 56)
    print(f"{'httptools':<44}{base:>12.1f}")
    print(f"{'httptools + guard':<44}{guard:>12.1f}")
    print()
    added = guard - base
    share = added / med("small (2 KB)", "httptools", "cpu_us")
    verdict = "PASS" if added <= TARGET_GUARD_US else "FAIL"
    print(f"{verdict}  the header guard adds {added:.1f} µs CPU per request ({100 * share:.1f} % of the server's CPU "
          f"for a small request end to end; target ≤ {TARGET_GUARD_US:g} µs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
