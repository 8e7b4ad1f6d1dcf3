"""Ingest bombs (issue 40 item 1): small request bodies that decode into huge memory, and the scenario
that throws them at a real archive while another token ingests steadily.

Each bomb is built from its documented wire format: gzip (RFC 1952; the 10 GiB one from identical
64 MiB deflate blocks, each ended by a full flush so that it is position-independent, with the true
CRC), zstd, msgpack's fixmap 0x80, Loki's ``PushRequest`` and OTLP's ``ExportLogsServiceRequest`` field
numbers, and an Arrow IPC stream whose lz4 buffers declare a gigabyte.

:func:`run_scenario` starts ``ranklog archive`` (from this tree, or from another checkout's
``exporters`` directory given as `code`) under an RSS watch that SIGKILLs it past `kill_rss` —
a bomb must never take the shared machine down — and with ``RLIMIT_AS`` as a backstop.
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import resource
import secrets
import signal
import statistics
import struct
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.helpers.archive_proc import ARROW, NDJSON, ArchiveHandle
from tests.helpers.net import free_port
from tests.helpers.shipper_bodies import length_delimited

MIB = 1024**2
_BLOCK = 64 * MIB


def _gf2_times(matrix: list[int], vector: int) -> int:
    total, row = 0, 0
    while vector:
        if vector & 1:
            total ^= matrix[row]
        vector >>= 1
        row += 1
    return total


def crc32_combine(crc1: int, crc2: int, length2: int) -> int:
    """zlib's crc32_combine: the CRC-32 of A+B from those of A and B and B's length (GF(2) matrices)."""
    odd = [0xEDB88320] + [1 << n for n in range(31)]  # the operator for one zero bit
    even = [_gf2_times(odd, odd[n]) for n in range(32)]  # two zero bits
    odd = [_gf2_times(even, even[n]) for n in range(32)]  # four
    while length2:
        even = [_gf2_times(odd, odd[n]) for n in range(32)]
        if length2 & 1:
            crc1 = _gf2_times(even, crc1)
        length2 >>= 1
        if not length2:
            break
        odd = [_gf2_times(even, even[n]) for n in range(32)]
        if length2 & 1:
            crc1 = _gf2_times(odd, crc1)
        length2 >>= 1
    return crc1 ^ crc2


@functools.cache
def gzip_zeros(blocks: int) -> bytes:
    """A valid gzip member of `blocks` × 64 MiB of zero bytes (10 GiB → 10 MB with 160 blocks)."""
    deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
    block = deflate.compress(bytes(_BLOCK)) + deflate.flush(zlib.Z_FULL_FLUSH)
    final = zlib.compressobj(6, zlib.DEFLATED, -15).flush(zlib.Z_FINISH)  # an empty last block
    one = zlib.crc32(bytes(_BLOCK))
    crc = one
    for _ in range(blocks - 1):
        crc = crc32_combine(crc, one, _BLOCK)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    return header + block * blocks + final + struct.pack("<II", crc, (blocks * _BLOCK) & 0xFFFFFFFF)


@functools.cache
def zstd_zeros(size: int) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.CompressedOutputStream(sink, "zstd") as stream:
        zeros = bytes(_BLOCK)
        for _ in range(size // _BLOCK):
            stream.write(zeros)
    return sink.getvalue().to_pybytes()


@functools.cache
def ndjson_empty_objects(decoded: int = 32 * MIB) -> bytes:
    """The issue's 33 KB gzip NDJSON body: `{}` lines, 32 MiB decoded (11 M records)."""
    return gzip.compress(b"{}\n" * (decoded // 3), 9)


@functools.cache
def json_array_empty_objects(decoded: int = 32 * MIB) -> bytes:
    count = decoded // 3
    return gzip.compress(b"[" + b"{}," * (count - 1) + b"{}]", 9)


@functools.cache
def msgpack_empty_maps(count: int = 2_000_000) -> bytes:
    """The issue's 8 KB gzip msgpack body: fixmap 0x80 bytes, each an empty record."""
    return gzip.compress(b"\x80" * count, 9)


@functools.cache
def loki_empty_entries(count: int = 1_000_000) -> bytes:
    """The issue's ~94 KB Loki protobuf (snappy): one stream of `count` empty entries."""
    import cramjam

    request = length_delimited(1, length_delimited(1, b'{job="bomb"}') + length_delimited(2, b"") * count)
    return bytes(cramjam.snappy.compress_raw(request))


@functools.cache
def otlp_empty_records(count: int = 1_000_000) -> bytes:
    """ExportLogsServiceRequest{resource_logs{scope_logs{log_records × count (empty)}}}, gzip."""
    return gzip.compress(length_delimited(1, length_delimited(2, length_delimited(2, b"") * count)), 9)


@functools.cache
def arrow_inflating(rows: int = 4, size: int = 1024 * MIB) -> bytes:
    """An agent-shaped Arrow IPC body (lz4 buffers, the agent's choice) whose `msg` column
    decompresses to `size` bytes."""
    import pyarrow as pa

    from ranklog.record import rows_to_table

    table = rows_to_table([{"ts": 1_700_000_000_000_000_000, "msg": "", "host": "bomb", "source": "bomb",
                            "source_id": "bomb", "offset": i, "format": "text"} for i in range(rows)])
    table = table.set_column(table.schema.get_field_index("msg"), "msg",
                             pa.array(["a" * (size // rows)] * rows, pa.string()))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


@dataclass(frozen=True)
class Bomb:
    name: str
    path: str
    content_type: str
    encoding: str | None
    body: Callable[[], bytes]
    copies: int = 1  # sent at once


BOMBS = (
    Bomb("NDJSON {} lines, 32 MiB decoded (gzip)", "/v1/ingest", NDJSON, "gzip", ndjson_empty_objects),
    Bomb("msgpack 0x80 × 2 M (gzip)", "/v1/ingest", "application/msgpack", "gzip", msgpack_empty_maps),
    Bomb("Loki protobuf, 1 M empty entries", "/loki/api/v1/push", "application/x-protobuf", None, loki_empty_entries),
    Bomb("JSON array of {} , 32 MiB decoded (gzip)", "/v1/ingest", "application/json", "gzip",
         json_array_empty_objects),
    Bomb("OTLP protobuf, 1 M empty records (gzip)", "/v1/logs", "application/x-protobuf", "gzip", otlp_empty_records),
    Bomb("Arrow IPC, lz4 buffers inflating to 1 GiB", "/v1/ingest", ARROW, None, arrow_inflating),
    Bomb("zstd 2 GiB of zeros", "/v1/ingest", NDJSON, "zstd", lambda: zstd_zeros(2048 * MIB)),
    Bomb("gzip 10 GiB of zeros, three at once", "/v1/ingest", NDJSON, "gzip", lambda: gzip_zeros(160), copies=3),
)


class RssWatch:
    """Samples a process's RSS every `interval` s; SIGKILLs it past `limit` bytes (recorded)."""

    def __init__(self, pid: int, limit: int, interval: float = 0.02) -> None:
        self.pid, self.limit, self.interval = pid, limit, interval
        self.peak = 0
        self.killed_at: float | None = None
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _rss(self) -> int:
        try:
            with open(f"/proc/{self.pid}/status") as handle:
                for line in handle:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = self._rss()
            self.peak = max(self.peak, rss)
            if rss > self.limit and self.killed_at is None:
                os.kill(self.pid, signal.SIGKILL)
                self.killed_at = time.monotonic() - self._started
                return
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)


@dataclass
class Outcome:
    bomb: str
    statuses: list[str]
    seconds: float  # until the last answer


@dataclass
class ScenarioResult:
    outcomes: list[Outcome] = field(default_factory=list)
    steady: list[tuple[int, float]] = field(default_factory=list)  # (status, seconds) of the steady token
    peak_rss: int = 0
    killed_at: float | None = None
    alive: bool = True
    rejected: dict[str, float] = field(default_factory=dict)
    stored_steady: int | None = None

    def steady_quantile(self, q: float) -> float:
        times = sorted(seconds for _, seconds in self.steady)
        if not times:
            return float("nan")
        return times[min(len(times) - 1, int(q * len(times)))]

    @property
    def steady_ok(self) -> int:
        return sum(1 for status, seconds in self.steady if status == 200 and seconds < 2.0)

    def steady_median(self) -> float:
        return statistics.median(seconds for _, seconds in self.steady) if self.steady else float("nan")


def _send(url: str, token: str, bomb: Bomb) -> str:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": bomb.content_type}
    if bomb.encoding:
        headers["Content-Encoding"] = bomb.encoding
    try:
        answer = httpx.post(url + bomb.path, content=bomb.body(), headers=headers, timeout=90)
    except httpx.HTTPError as exc:
        return type(exc).__name__
    return str(answer.status_code)


def _steady(url: str, token: str, stop: threading.Event, out: list[tuple[int, float]]) -> None:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": NDJSON}
    with httpx.Client(timeout=30) as client:
        n = 0
        while not stop.is_set():
            body = "\n".join(json.dumps({"msg": f"steady {n}.{i}", "source_id": "steady", "offset": n * 10 + i})
                             for i in range(10)).encode()
            started = time.monotonic()
            try:
                status = client.post(f"{url}/v1/ingest", content=body, headers=headers).status_code
            except httpx.HTTPError:
                status = 0
            out.append((status, time.monotonic() - started))
            n += 1
            stop.wait(0.2)


def _limit_address_space(limit: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def run_scenario(tmp: Path, code: str | None = None, kill_rss: int = 2048 * MIB, address_space: int = 16 * 1024 * MIB,
                 extra_args: tuple[str, ...] = (), bombs: tuple[Bomb, ...] = BOMBS) -> ScenarioResult:
    """Bombs on token A, one kind after the other (three at once for the last), while token B posts 10
    records every 0.2 s; `code`: an ``exporters`` directory to run instead of this tree's."""
    from tests.helpers.archive_proc import read_archive
    from tests.reliability.test_slow_clients import archive_metrics

    for bomb in bombs:
        bomb.body()  # built before the clock starts
    bomber, steady_token = secrets.token_hex(16), secrets.token_hex(16)
    tmp.mkdir(parents=True, exist_ok=True)
    token_file = tmp / "tokens"
    token_file.write_text(f"{steady_token}\n{bomber}\n")
    token_file.chmod(0o600)
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [code, os.environ.get("PYTHONPATH", "")]))} if code else None
    handle = ArchiveHandle(root=tmp / "archive", token_file=token_file, port=free_port(), env=env,
                           extra_args=("--flush-interval", "500ms", *extra_args), log_path=tmp / "archive.log",
                           preexec_fn=_limit_address_space(address_space))
    result = ScenarioResult()
    handle.start()
    watch = RssWatch(handle.proc.pid, kill_rss)
    stop = threading.Event()
    steady = threading.Thread(target=_steady, args=(handle.url, steady_token, stop, result.steady), daemon=True)
    try:
        steady.start()
        time.sleep(1.0)
        for bomb in bombs:
            if handle.proc.poll() is not None:
                result.outcomes.append(Outcome(bomb.name, ["archive dead"], 0.0))
                continue
            started = time.monotonic()
            answers: list[str] = []
            threads = [threading.Thread(target=lambda b=bomb, out=answers: out.append(_send(handle.url, bomber, b)))
                       for _ in range(bomb.copies)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(120)
            result.outcomes.append(Outcome(bomb.name, sorted(answers), time.monotonic() - started))
            time.sleep(0.5)
        time.sleep(1.0)
    finally:
        stop.set()
        steady.join(30)
        watch.stop()
        result.peak_rss, result.killed_at = watch.peak, watch.killed_at
        result.alive = handle.proc.poll() is None
        if result.alive:
            result.rejected = archive_metrics(handle.url)
            time.sleep(1.5)  # one more flush
            stored = read_archive(handle.root)
            result.stored_steady = sum(1 for sid in stored["source_id"].to_pylist() if sid == "steady")
        handle.stop()
    return result
