"""The shipping client against a real HTTP server with scripted answers."""

from __future__ import annotations

import json
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
                      **{"backoff_initial": 0.05, "backoff_max": 0.5, "batch_latency": 0.05, **overrides})
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


@pytest.mark.parametrize("status", [404, 500])
def test_other_errors_back_off_and_retry(tmp_path: Path, status: int) -> None:
    """A 5xx, or a 4xx that means misconfiguration (404/405/415), is retried as is: nothing given up."""
    with scripted_archive([(status, {})]) as archive:
        shipper, metrics, acks = _shipper(tmp_path, [archive.url])
        try:
            shipper.submit(Chunk("h:1:2:ab", 0, 10, {}, _batch(2), 2))
            assert len(_wait_acked(shipper, acks, 1)) == 1
        finally:
            shipper.stop()
    reason = "rejected" if status == 404 else "http_5xx"
    assert _value(metrics, "ranklog_agent_ship_failures_total", reason=reason) == 1
    assert archive.accepted_rows == 2


def _poison_chunks() -> list[Chunk]:
    chunks = [Chunk("h:1:2:ab", i * 1000, i * 1000 + 1000, {}, _batch(25, start=i * 1000), 25) for i in range(4)]
    batch = chunks[2].batch
    msg = batch.column("msg").to_pylist()
    msg[7] = "poison"
    chunks[2].batch = batch.set_column(batch.schema.get_field_index("msg"), "msg", pa.array(msg))
    return chunks


@pytest.mark.parametrize("stand_in_refused", [False, True])
def test_a_refused_record_is_isolated_and_the_rest_ships(tmp_path: Path, caplog, stand_in_refused: bool) -> None:
    """Issue 20: an archive that refuses one specific record (400) never stalls the source. The agent
    bisects, ships the other 99 records, re-sends the refused one as a text record carrying the
    error (or, when that is refused as well, counts it lost, logs its key) and acknowledges every chunk."""
    if stand_in_refused:
        def refuse(row):
            return "poison" in row["msg"]
    else:
        def refuse(row):
            return row["msg"] == "poison"  # the stand-in carries it inside JSON text
    with scripted_archive(refuse=refuse) as archive:
        shipper, metrics, acks = _shipper(tmp_path, [archive.url], batch_bytes=10**9)
        try:
            for chunk in _poison_chunks():
                shipper.submit(chunk)
            assert len(_wait_acked(shipper, acks, 4)) == 4
        finally:
            shipper.stop()
    stored = pa.concat_tables(archive.tables)
    every = {c.start + i * 10 for c in _poison_chunks() for i in range(25)}
    assert sorted(stored["offset"].to_pylist()) == sorted(every - ({2070} if stand_in_refused else set()))
    assert _value(metrics, "ranklog_agent_quarantined_records_total") == 1
    assert _value(metrics, "ranklog_agent_records_shipped_total") == 100
    assert _value(metrics, "ranklog_agent_ship_failures_total", reason="rejected") >= 3  # log2(100) halvings
    if stand_in_refused:
        assert _value(metrics, "ranklog_agent_lost_records_total", reason="refused") == 1
        assert "offset 2070" in caplog.text and "LOST" in caplog.text
    else:
        assert _value(metrics, "ranklog_agent_lost_records_total", reason="refused") == 0
        (stand_in,) = [r for r in stored.drop_columns(["ts"]).to_pylist() if r["offset"] == 2070]
        assert stand_in["format"] == "text" and json.loads(stand_in["msg"])["msg"] == "poison"
        assert json.loads(stand_in["attrs"])["ship_error"].startswith("HTTP 400")
        assert stand_in["source_id"] == "h:1:2:ab"


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


def test_once_caught_up_requests_wait_only_to_bound_a_trickle(tmp_path: Path) -> None:
    """With the reader caught up: a lone record goes at once; a trickle right after it waits
    (≤ one request per batch_latency); a request cut full makes the burst's tail go at once (once);
    a quarter of batch_bytes goes at once."""
    with scripted_archive() as archive:
        shipper, _, acks = _shipper(tmp_path, [archive.url], batch_bytes=1000, batch_latency=30.0)

        def submit(start: int, end: int, rows: int) -> None:
            shipper.submit(Chunk("h:1:2:ab", start, end, {}, _batch(rows, start=start), rows))

        try:
            submit(0, 100, 1)
            shipper.tick()
            assert shipper._open  # still reading: batching
            shipper.tick(caught_up=True)
            assert not shipper._open  # a lone record: no request went in the last 30 s
            submit(100, 200, 1)
            shipper.tick(caught_up=True)  # a trickle: one request just went, so this one waits
            assert shipper._open
            submit(200, 1200, 6)  # full: cut
            submit(1200, 1300, 3)  # the burst's tail
            shipper.tick()
            assert len(shipper._open) == 1  # not caught up yet: still open
            shipper.tick(caught_up=True)
            assert not shipper._open  # the tail went without waiting 30 s
            submit(1300, 1400, 1)
            shipper.tick(caught_up=True)  # one early cut per full one: this one waits again
            assert shipper._open
            submit(1400, 1600, 2)
            shipper.tick(caught_up=True)  # 300 bytes: a quarter request goes when the reader caught up
            assert not shipper._open
            assert len(_wait_acked(shipper, acks, 6, timeout=10)) == 6
        finally:
            shipper.stop()
    assert sorted(r.rows for r in archive.received) == [1, 3, 3, 7]  # two senders: either may answer first


def test_a_run_of_reading_thread_chunks_travels_as_one_message(tmp_path: Path) -> None:
    """A request of many small chunks (a trickle's, parsed in the reading thread) encodes each run of
    them between worker-encoded chunks as one record batch message, not one per chunk (~50 µs each
    whatever the size); the archive gets every row, in order, and a batch of another schema (a
    record built from rows) is cast to the request's."""
    from ranklog.agent.ship import encode_message

    loss = rows_to_table([{"ts": 1_796_212_800 * 10**9, "level": "WARNING", "msg": "lost", "host": "h",
                           "ip": "127.0.0.1", "source": "/x.log", "source_id": "h:1:2:ab", "offset": 5000,
                           "format": "ranklog-agent"}]).to_batches()[0]
    chunks = [Chunk("h:1:2:ab", i * 100, i * 100 + 100, {}, _batch(3, start=i * 100), 3) for i in range(4)]
    encoded = Chunk("h:1:2:ab", 400, 500, {}, None, 5)
    encoded.encoded = encode_message(_batch(5, start=400), arrow_schema())
    chunks += [encoded, Chunk("h:1:2:ab", 500, 600, {}, _batch(2, start=500), 2),
               Chunk("h:1:2:ab", 5000, 5000, {}, loss, 1)]
    with scripted_archive() as archive:
        shipper, _, acks = _shipper(tmp_path, [archive.url])
        try:
            for chunk in chunks:
                shipper.submit(chunk)
            assert len(_wait_acked(shipper, acks, len(chunks))) == len(chunks)
        finally:
            shipper.stop()
    (table,) = archive.tables
    assert table.column("offset").to_pylist() == [*(i * 100 + k * 10 for i in range(4) for k in range(3)),
                                                  *range(400, 450, 10), 500, 510, 5000]
    assert [len(batch) for batch in table.to_batches()] == [12, 5, 3]
