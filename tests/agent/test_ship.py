"""The shipping client against a real HTTP server with scripted answers."""

from __future__ import annotations

import queue
import time
from pathlib import Path

import pyarrow as pa
import pytest

from ranklog.agent.agent_config import AgentConfig
from ranklog.agent.chunk import Chunk
from ranklog.agent.ship import CONTENT_TYPE, Shipper
from ranklog.metrics import create
from ranklog.record import arrow_schema, rows_to_table
from tests.agent.scripted_archive import scripted_archive
from tests.helpers.net import free_port


def _batch(n: int, source_id: str = "h:1:2:ab", start: int = 0) -> pa.RecordBatch:
    rows = [{"ts": 1_796_212_800 * 10**9 + i, "level": "INFO", "msg": f"line {i}", "host": "h", "ip": "127.0.0.1",
             "source": "/x.log", "source_id": source_id, "offset": start + i * 10, "format": "text"} for i in range(n)]
    return rows_to_table(rows).combine_chunks().to_batches()[0]


def _shipper(tmp_path: Path, urls: list[str], **overrides):
    token = tmp_path / "tok"
    token.write_text("tok-1\n")
    cfg = AgentConfig(archive=urls, token_file=str(token), sources=[], preset=["ranklog"],
                      backoff_initial=0.05, backoff_max=0.5, batch_latency=0.05, **overrides)
    metrics = create("agent")
    acks: queue.SimpleQueue = queue.SimpleQueue()
    shipper = Shipper(cfg, metrics, acks.put, arrow_schema())
    shipper.start()
    return shipper, metrics, acks


def _wait_acked(shipper: Shipper, acks: queue.SimpleQueue, count: int, timeout: float = 20) -> list[Chunk]:
    got: list[Chunk] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        shipper.tick()
        try:
            got += acks.get(timeout=0.05)
        except queue.Empty:
            pass
    return got


def _value(metrics, name: str, **labels) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def test_ships_arrow_with_token_and_acks(tmp_path: Path) -> None:
    with scripted_archive() as archive:
        shipper, metrics, acks = _shipper(tmp_path, [archive.url])
        try:
            chunk = Chunk("h:1:2:ab", 0, 100, {}, _batch(10), 10)
            shipper.submit(chunk)
            assert _wait_acked(shipper, acks, 1) == [chunk]
        finally:
            shipper.stop()
    (received,) = archive.received
    assert (received.rows, received.auth, received.content_type) == (10, "Bearer tok-1", CONTENT_TYPE)
    assert archive.tables[0].column("msg").to_pylist()[:2] == ["line 0", "line 1"]
    assert _value(metrics, "ranklog_agent_records_shipped_total") == 10


def test_retry_after_is_honoured_and_nothing_dropped(tmp_path: Path) -> None:
    script = [(429, {"Retry-After": "1"}), (503, {"Retry-After": "0"}), (507, {})]
    with scripted_archive(script) as archive:
        shipper, metrics, acks = _shipper(tmp_path, [archive.url])
        try:
            shipper.submit(Chunk("h:1:2:ab", 0, 100, {}, _batch(5), 5))
            assert len(_wait_acked(shipper, acks, 1)) == 1
        finally:
            shipper.stop()
    statuses = [r.status for r in archive.received]
    assert statuses == [429, 503, 507, 200]
    assert archive.received[1].at - archive.received[0].at >= 0.95  # waited the Retry-After second
    for reason in ("throttled", "unavailable", "disk_full"):
        assert _value(metrics, "ranklog_agent_ship_failures_total", reason=reason) == 1


def test_too_large_request_is_split(tmp_path: Path) -> None:
    with scripted_archive(max_rows=30) as archive:
        shipper, metrics, acks = _shipper(tmp_path, [archive.url])
        try:
            chunks = [Chunk("h:1:2:ab", i * 100, i * 100 + 100, {}, _batch(25, start=i * 100), 25) for i in range(4)]
            for chunk in chunks:
                shipper.submit(chunk)
            assert len(_wait_acked(shipper, acks, 4)) == 4
        finally:
            shipper.stop()
    assert archive.accepted_rows == 100
    assert _value(metrics, "ranklog_agent_ship_failures_total", reason="too_large") >= 1


def test_fail_over_to_the_next_endpoint_and_401_parks_one(tmp_path: Path, caplog) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with scripted_archive([(401, {})]) as refusing, scripted_archive() as healthy:
        shipper, metrics, acks = _shipper(tmp_path, [dead, refusing.url, healthy.url])
        try:
            chunks = [Chunk(f"h:{i}:1:ab", 0, 10, {}, _batch(1, source_id=f"h:{i}:1:ab"), 1) for i in range(12)]
            for chunk in chunks:
                shipper.submit(chunk)
            assert len(_wait_acked(shipper, acks, 12)) == 12
        finally:
            shipper.stop()
    assert refusing.received[0].status == 401
    assert refusing.accepted_rows + healthy.accepted_rows == 12
    assert _value(metrics, "ranklog_agent_ship_failures_total", reason="connect") >= 1
    assert _value(metrics, "ranklog_agent_ship_failures_total", reason="unauthorized") == 1
    assert "refused our token" in caplog.text


def test_empty_chunks_are_acked_without_a_request(tmp_path: Path) -> None:
    with scripted_archive() as archive:
        shipper, _, acks = _shipper(tmp_path, [archive.url])
        try:
            chunk = Chunk("h:1:2:ab", 0, 3, {}, None, 0)
            shipper.submit(chunk)
            assert _wait_acked(shipper, acks, 1, timeout=5) == [chunk]
        finally:
            shipper.stop()
    assert archive.received == []


@pytest.mark.parametrize("status", [400, 500])
def test_other_errors_back_off_and_retry(tmp_path: Path, status: int) -> None:
    with scripted_archive([(status, {})]) as archive:
        shipper, metrics, acks = _shipper(tmp_path, [archive.url])
        try:
            shipper.submit(Chunk("h:1:2:ab", 0, 10, {}, _batch(2), 2))
            assert len(_wait_acked(shipper, acks, 1)) == 1
        finally:
            shipper.stop()
    reason = "rejected" if status == 400 else "http_5xx"
    assert _value(metrics, "ranklog_agent_ship_failures_total", reason=reason) == 1
    assert archive.accepted_rows == 2


# frame magic numbers, little-endian, as they open each compressed Arrow buffer
_FRAME_MAGIC = {"lz4": b"\x04\x22\x4d\x18", "zstd": b"\x28\xb5\x2f\xfd"}


@pytest.mark.parametrize("compression", ["lz4", "zstd"])
def test_request_codec_is_configurable_and_the_archive_decodes_it(tmp_path: Path, compression: str) -> None:
    from ranklog.agent.ship import encode
    from ranklog.archive.ingest import read_arrow_stream

    body = encode([_batch(50)], arrow_schema(), compression)
    other = next(name for name in _FRAME_MAGIC if name != compression)
    assert _FRAME_MAGIC[compression] in body and _FRAME_MAGIC[other] not in body
    assert read_arrow_stream(body).column("msg").to_pylist() == [f"line {i}" for i in range(50)]
    with scripted_archive() as archive:
        shipper, _, acks = _shipper(tmp_path, [archive.url], compression=compression)
        try:
            shipper.submit(Chunk("h:1:2:ab", 0, 100, {}, _batch(50), 50))
            assert len(_wait_acked(shipper, acks, 1)) == 1
        finally:
            shipper.stop()
    assert archive.tables[0].column("msg").to_pylist() == [f"line {i}" for i in range(50)]


def test_lz4_is_the_default_codec() -> None:
    assert AgentConfig().compression == "lz4"
