"""Load: 1,000 simulated agents against 3 archives sharing one S3 bucket (SeaweedFS), for 60 s.

    python tests/benchmarks/load_s3_fleet.py [--agents 1000] [--seconds 60] [--rate 10] [--quick]

One process multiplexes the agents (asyncio, keep-alive HTTP/1.1 connections, requests pre-built): each agent is one source (its own
`source_id`, host and rank) that every `--interval` seconds ships the lines it produced since (at
`--rate` lines/s) as one Arrow IPC request to its archive (agent i → archive i mod 3; on a failed
request it re-sends the same body to the next archive, as the real agent fails over). An agent whose
previous request has not been answered waits (the real agent's one-in-flight-per-archive pipeline),
so an archive that falls behind shows as a lower rate and longer ACK latency, not as unbounded
queues. Bodies are encoded before the clock starts so the generator spends its CPU on HTTP.

Measured: records/s ACKed over the run, p50/p99 ACK latency (request sent → 200), the archives'
peak RSS (VmHWM), and, after the run, every (source_id, offset) read back from the bucket with
pyarrow over S3: lost = sent offsets with no row, duplicated = rows beyond the first per key.
The figures go to RELIABILITY.md as the row "3 archives on one bucket, 1,000 agents" (other rows are
kept). Bounded: `--seconds` of load, then at most 120 s of waiting for the flushes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "exporters"))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

from tests.helpers.archive_proc import ARROW, arrow_body, running_archive  # noqa: E402
from tests.helpers.corpus import generate  # noqa: E402
from tests.helpers.s3_data import read_s3_archive  # noqa: E402
from tests.helpers.seaweedfs import running_seaweedfs  # noqa: E402

ARCHIVES = 3


def _bodies(agents: int, ticks: int, per_tick: int) -> list[list[bytes]]:
    """bodies[tick][agent]: `per_tick` records of agent `agent`, offsets continuing tick after tick."""
    rows = agents * ticks * per_tick
    table = generate(rows, start_ns=time.time_ns() - 600 * 10**9, span_s=300, hosts=max(1, agents // 8),
                     ranks_per_host=8, seed=6)
    agent = np.arange(rows) % agents
    index = np.arange(rows) // agents  # the record's position in its agent's stream
    table = table.set_column(table.schema.get_field_index("source_id"), "source_id",
                             pa.array([f"load-{a:04d}" for a in range(agents)]).take(pa.array(agent)))
    table = table.set_column(table.schema.get_field_index("offset"), "offset", pa.array(index * 120, pa.int64()))
    out = []
    for tick in range(ticks):
        chunk = table.slice(tick * agents * per_tick, agents * per_tick)
        order = pc.sort_indices(chunk, sort_keys=[("source_id", "ascending")])
        chunk = chunk.take(order)
        out.append([arrow_body(chunk.slice(a * per_tick, per_tick), "lz4") for a in range(agents)])
    return out


class _Pool:
    """Keep-alive HTTP/1.1 connections to one archive, on asyncio streams: a request is one pre-built
    byte string, so the generator's CPU goes to the wire, not to a client library (httpx cost ~1 ms of
    CPU per request, more than the 500 requests/s of this load leave on a shared 2-core machine)."""

    def __init__(self, url: str, size: int) -> None:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        self.host, self.port, self.size = host, int(port), size
        self.idle: asyncio.Queue = asyncio.Queue()
        for _ in range(size):
            self.idle.put_nowait(None)  # a slot; connected on first use

    async def post(self, request: bytes) -> int:
        slot = await self.idle.get()
        try:
            if slot is None:
                slot = await asyncio.open_connection(self.host, self.port)
            reader, writer = slot
            writer.write(request)
            status = int((await reader.readline()).split()[1])
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
            return status
        except (OSError, ValueError, IndexError, asyncio.IncompleteReadError):
            if slot is not None:
                slot[1].close()
            slot = None
            raise OSError("connection failed") from None
        finally:
            self.idle.put_nowait(slot)


def _request(url: str, token: str, body: bytes) -> bytes:
    host = url.removeprefix("http://")
    return (f"POST /v1/ingest HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: {ARROW}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


async def _run_load(urls: list[str], token: str, bodies: list[list[bytes]], interval: float,
                    per_tick: int) -> dict:
    latencies: list[float] = []
    acked = failovers = 0
    pools = [_Pool(url, 64) for url in urls]
    requests = [[[_request(url, token, body) for url in urls] for body in row] for row in bodies]
    start = time.monotonic()

    async def agent(index: int) -> None:
        nonlocal acked, failovers
        for tick, row in enumerate(requests):
            due = start + interval * (tick + index / len(row))
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            target = index % len(urls)
            while True:
                sent = time.monotonic()
                try:
                    if await pools[target].post(row[index][target]) == 200:
                        latencies.append(time.monotonic() - sent)
                        acked += per_tick
                        break
                except OSError:
                    pass
                failovers += 1
                target = (target + 1) % len(urls)
                await asyncio.sleep(0.2)

    await asyncio.gather(*(agent(i) for i in range(len(bodies[0]))))
    elapsed = time.monotonic() - start
    return {"acked": acked, "elapsed": elapsed, "latencies": latencies, "failovers": failovers}


def _peak_rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=10.0, help="lines/s per agent")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between one agent's requests")
    parser.add_argument("--quick", action="store_true", help="100 agents for 15 s (smoke)")
    parser.add_argument("--no-report", action="store_true", help="do not write RELIABILITY.md")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # unwind: stop the archives and SeaweedFS
    if args.quick:
        args.agents, args.seconds = 100, 15.0
    ticks = max(1, int(args.seconds / args.interval))
    per_tick = max(1, int(args.rate * args.interval))
    print(f"encoding {args.agents} agents × {ticks} requests × {per_tick} lines …", flush=True)
    bodies = _bodies(args.agents, ticks, per_tick)
    sent = args.agents * ticks * per_tick
    with tempfile.TemporaryDirectory(prefix="ranklog-load-") as scratch, \
            running_seaweedfs(Path(scratch) / "seaweedfs") as seaweedfs, contextlib.ExitStack() as stack:
        work = Path(scratch)
        token_file = work / "tokens"
        token_file.write_text(os.urandom(16).hex() + "\n")
        root = f"s3://{seaweedfs.new_bucket('load')}/archive"
        archives = [stack.enter_context(running_archive(
            root, token_file, log_path=work / f"a{i}.log", env=seaweedfs.env(),
            extra_args=["--archive-id", f"a{i}", "--state-dir", str(work / f"a{i}")])) for i in range(ARCHIVES)]
        print(f"load: {args.agents} agents, {args.rate:g} lines/s each, {args.seconds:g} s, {ARCHIVES} archives on "
              f"{root}", flush=True)
        result = asyncio.run(_run_load([a.url for a in archives], archives[0].token, bodies, args.interval, per_tick))
        rss = [_peak_rss(a.proc.pid) for a in archives]
        deadline = time.monotonic() + 120
        stored = read_s3_archive(seaweedfs, root)
        while stored.num_rows < sent and time.monotonic() < deadline:
            time.sleep(2)
            stored = read_s3_archive(seaweedfs, root)
        keys = pc.binary_join_element_wise(stored["source_id"], pc.cast(stored["offset"], pa.string()), "@")
        distinct = len(pc.unique(keys))
    lat = sorted(result["latencies"])
    p50 = statistics.median(lat) * 1000
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
    rate = result["acked"] / result["elapsed"]
    lost, duplicated = sent - distinct, stored.num_rows - distinct
    print(f"{'sent':>10} {'acked/s':>10} {'target/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'RSS MB (max)':>13} "
          f"{'lost':>6} {'dup':>6}")
    print(f"{sent:>10,} {rate:>10,.0f} {args.agents * args.rate:>10,.0f} {p50:>8.1f} {p99:>8.1f} "
          f"{max(rss) / 1e6:>13.0f} {lost:>6} {duplicated:>6}")
    print(f"{'PASS' if lost == 0 and duplicated == 0 else 'FAIL'}: 0 lost / 0 duplicated "
          f"({result['failovers']} failed attempts re-sent)")
    if not args.no_report:
        from tests.reliability import report

        report.write([report.Row(
            f"3 archives on one bucket, {args.agents:,} agents", f"{args.agents:,} simulated agents (one process, "
            f"one request per agent every {args.interval:g} s, {args.rate:g} lines/s each) for {result['elapsed']:.0f} s "
            f"against {ARCHIVES} archives on one SeaweedFS bucket (tests/benchmarks/load_s3_fleet.py)",
            "every (source_id, offset) sent vs the bucket's rows (pyarrow over S3)", sent, stored.num_rows, lost,
            duplicated, None, f"{rate:,.0f} records/s ACKed (offered {args.agents * args.rate:,.0f}); ACK latency "
            f"p50 {p50:.0f} ms, p99 {p99:.0f} ms; archive peak RSS {', '.join(f'{r / 1e6:.0f}' for r in rss)} MB; "
            f"{result['failovers']} failed attempts re-sent; machine shared with other work",
            passed=lost == 0 and duplicated == 0)])
    return 0 if lost == 0 and duplicated == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
