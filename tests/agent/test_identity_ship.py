"""The shipper against a real archive process with per-node tokens (issue 20, item 4): records whose
line named another host are re-sent under this node's name, and duplicates the agent never sent
are counted as unexpected while its own re-sends are not."""

from __future__ import annotations

import json
import logging
import queue
import time
from pathlib import Path

import httpx
import pyarrow as pa

from ranklog.agent.agent_config import AgentConfig
from ranklog.agent.chunk import Chunk
from ranklog.agent.ship import Shipper
from ranklog.metrics import create
from ranklog.record import arrow_schema, rows_to_table
from tests.helpers.archive_proc import NDJSON, read_archive, running_archive

SOURCE = "node-a:801:1f:abc"


def _batch(offsets: list[int], host: str | None = "node-a", hosts: dict[int, str] | None = None) -> pa.RecordBatch:
    rows = [{"ts": 1_796_212_800 * 10**9 + o, "level": "INFO", "msg": f"line @{o}", "ip": "10.0.0.1",
             "host": (hosts or {}).get(o, host), "source": "/x.log", "source_id": SOURCE, "offset": o,
             "format": "ranklog", "attrs": json.dumps({"k": o})} for o in offsets]
    return rows_to_table(rows).combine_chunks().to_batches()[0]


def _shipper(token: Path, url: str, host: str = "node-a"):
    cfg = AgentConfig(archive=[url], token_file=str(token), sources=[], preset=["ranklog"], host=host,
                      backoff_initial=0.05, backoff_max=0.5, batch_latency=0.05)
    metrics = create("agent")
    acks: queue.SimpleQueue = queue.SimpleQueue()
    shipper = Shipper(cfg, metrics, acks.put, arrow_schema())
    shipper.start()
    return shipper, metrics, acks


def _ship(shipper: Shipper, acks: queue.SimpleQueue, chunks: list[Chunk], timeout: float = 30) -> None:
    for chunk in chunks:
        shipper.submit(chunk)
        shipper.tick(force=True)
    got, deadline = 0, time.monotonic() + timeout
    while got < len(chunks) and time.monotonic() < deadline:
        try:
            got += len(acks.get(timeout=0.1))
        except queue.Empty:
            pass
    assert got == len(chunks)


def wait_rows(root: Path, rows: int, timeout: float = 30) -> pa.Table:
    deadline = time.monotonic() + timeout
    table = read_archive(root)
    while table.num_rows < rows and time.monotonic() < deadline:
        time.sleep(0.2)
        table = read_archive(root)
    return table


def _value(metrics, name: str, **labels) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def test_a_line_naming_another_host_is_rehosted_not_stalled(tmp_path: Path, caplog) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("tok-a node-a\n")
    agent_token = tmp_path / "agent-token"
    agent_token.write_text("tok-a node-a\n")  # the archive's line works as the agent's token file
    with running_archive(tmp_path / "archive", tokens, extra_args=("--flush-interval", "200ms")) as archive:
        shipper, metrics, acks = _shipper(agent_token, archive.url)
        try:
            with caplog.at_level(logging.WARNING):
                _ship(shipper, acks, [Chunk(SOURCE, 0, 40, {}, _batch([0, 10, 20, 30], hosts={10: "pod-7"}), 4)])
        finally:
            shipper.stop()
        table = wait_rows(archive.root, 4)
    rows = {r["offset"]: r for r in table.to_pylist()}
    assert sorted(rows) == [0, 10, 20, 30]
    assert {r["host"] for r in rows.values()} == {"node-a"}
    assert json.loads(rows[10]["attrs"]) == {"k": 10, "line_host": "pod-7"}
    assert json.loads(rows[20]["attrs"]) == {"k": 20}
    assert _value(metrics, "ranklog_agent_ship_failures_total", reason="host_not_allowed") == 1
    assert _value(metrics, "ranklog_agent_unexpected_duplicates_total") == 0
    assert "pod-7" in caplog.text and "attrs.line_host" in caplog.text


def test_unexpected_duplicates_are_counted_and_own_resends_are_not(tmp_path: Path, caplog) -> None:
    """Shared token (trusting mode): a forger writes this node's key at offset 0 first; the agent's
    first send of offset 0 is answered 'duplicate' → counted and logged. Re-sending what it may have
    sent before (a restart's backlog) is not counted."""
    tokens = tmp_path / "tokens"
    tokens.write_text("shared-secret\n")
    with running_archive(tmp_path / "archive", tokens, extra_args=("--flush-interval", "200ms")) as archive:
        forged = json.dumps({"ts": "2026-12-02T13:04:05Z", "msg": "forged", "host": "node-a", "source": "/x.log",
                             "source_id": SOURCE, "offset": 0})
        answer = httpx.post(f"{archive.url}/v1/ingest", content=forged.encode(), headers=archive.headers(NDJSON))
        assert answer.json() == {"accepted": 1, "duplicates": 0}
        shipper, metrics, acks = _shipper(tokens, archive.url)
        try:
            with caplog.at_level(logging.WARNING):
                _ship(shipper, acks, [Chunk(SOURCE, 0, 30, {}, _batch([0, 10, 20]), 3)])
                assert _value(metrics, "ranklog_agent_unexpected_duplicates_total") == 1
                # the agent's own re-send of bytes an earlier process may have shipped: expected
                _ship(shipper, acks, [Chunk(SOURCE, 0, 30, {}, _batch([0, 10, 20]), 3, maybe_sent=True)])
                _ship(shipper, acks, [Chunk(SOURCE, 30, 40, {}, _batch([30]), 1)])
        finally:
            shipper.stop()
    assert _value(metrics, "ranklog_agent_unexpected_duplicates_total") == 1
    assert _value(metrics, "ranklog_agent_records_shipped_total") == 7
    assert "never sent before" in caplog.text and SOURCE in caplog.text and "shared-secret" not in caplog.text
