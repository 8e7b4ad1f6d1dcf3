"""The ingest memory budget's pieces, in process: charges and refusals, the wire counts it relies on."""

from __future__ import annotations

import gzip
import json
import time

import cramjam
import pyarrow as pa
import pytest

from ranklog.archive.ingest import decompress
from ranklog.archive.ingest_budget import ROW_COST, IngestBudget, OverBudget
from ranklog.archive.ipc_sizes import declared
from ranklog.archive.shippers import dispatch, protobuf_count
from ranklog.archive.shippers.batch import wrap
from tests.helpers.shipper_bodies import length_delimited, otlp_protobuf, push_request


class _Gauge:
    value = 0

    def set(self, value: int) -> None:
        self.value = value


def test_a_request_too_big_for_its_token_is_413_and_one_that_waits_for_others_is_429():
    gauge = _Gauge()
    budget = IngestBudget(total=100, per_token=60, max_records=10, gauge=gauge)
    first, second, other = budget.open("a"), budget.open("a"), budget.open("b")
    first.add(50)
    with pytest.raises(OverBudget) as too_big:
        second.add(61)
    assert too_big.value.status == 413 and too_big.value.reason == "too_large"
    with pytest.raises(OverBudget) as wait:
        second.add(20)  # fits a token's share, but token a holds 50 of its 60
    assert wait.value.status == 429 and wait.value.reason == "memory_budget"
    other.add(45)
    with pytest.raises(OverBudget) as full:
        budget.open("c").add(10)  # 95 of 100 held by the archive
    assert full.value.status == 429
    assert gauge.value == 95 and budget.held == 95
    first.close()
    second.add(20)
    other.close()
    second.close()
    assert budget.held == 0 and gauge.value == 0
    with pytest.raises(OverBudget) as many:
        budget.open("a").records(11)
    assert many.value.status == 413 and many.value.reason == "too_many_records"


def test_a_gzip_bomb_is_refused_at_the_budget_having_inflated_no_more_than_it():
    budget = IngestBudget(total=64 << 20, per_token=32 << 20, max_records=10)
    charge = budget.open("a")
    with pytest.raises(OverBudget):
        decompress(gzip.compress(bytes(256 << 20), 1), 1, 1 << 30, charge)
    assert charge.held <= 32 << 20
    ok = json.dumps({"msg": "x"}).encode() * 1000
    assert decompress(gzip.compress(ok), 1, 1 << 30, budget.open("b")) == ok


def test_bodies_are_refused_before_their_records_are_made():
    """Each decoder charges before it expands: the charge exceeds what the records would take."""
    budget = IngestBudget(total=1 << 30, per_token=200 * ROW_COST, max_records=10**6)
    bodies = {
        dispatch.MSGPACK: wrap("", b"\x80" * 100_000),
        dispatch.LOKI_PROTOBUF: wrap("", bytes(cramjam.snappy.compress_raw(
            length_delimited(1, length_delimited(1, b'{a="b"}') + length_delimited(2, b"") * 100_000)))),
        dispatch.OTLP_PROTOBUF: wrap("", length_delimited(1, length_delimited(2, length_delimited(2, b"") * 100_000))),
        dispatch.JSON_ARRAY: wrap("", b"[" + b"{}," * 99_999 + b"{}]"),
        2: b"{}\n" * 100_000,
    }
    for code, body in bodies.items():
        charge = budget.open(str(code))
        with pytest.raises(OverBudget) as refused:
            dispatch.decode_body(body, code, 0, time.time_ns(), 1 << 30, charge)
        assert refused.value.status == 413, code
        charge.close()
    assert budget.held == 0


def test_ordinary_bodies_decode_within_the_budget():
    budget = IngestBudget(total=256 << 20, per_token=128 << 20, max_records=10**6)
    lines = [{"msg": f"line {i}", "host": "n1", "rank": i % 4} for i in range(2000)]
    loki = push_request('{job="a"}', [(1_700_000_000_000_000_000 + i, f"line {i}", {}) for i in range(2000)])
    bodies = {2: "\n".join(json.dumps(line) for line in lines).encode(),
              dispatch.LOKI_PROTOBUF: wrap("", bytes(cramjam.snappy.compress_raw(loki))),
              dispatch.OTLP_PROTOBUF: wrap("", otlp_protobuf("hello", 1_700_000_000_000_000_000, 3, "j"))}
    for code, body in bodies.items():
        with budget.open(str(code)) as charge:
            table = dispatch.decode_body(body, code, 0, time.time_ns(), 1 << 30, charge)
            assert table.num_rows in (1, 2000)
    assert budget.held == 0


def test_protobuf_records_are_counted_on_the_wire():
    loki = push_request('{job="a"}', [(1, "a", {"k": "v"}), (2, "b", {})]) + push_request('{job="b"}', [(3, "c", {})])
    assert protobuf_count.count(loki, protobuf_count.LOKI_ENTRIES, 10**9) == 3
    assert protobuf_count.count(otlp_protobuf("x", 1, 0, "j"), protobuf_count.OTLP_LOG_RECORDS, 10**9) == 1
    many = length_delimited(1, length_delimited(2, length_delimited(2, b"") * 5000))
    assert protobuf_count.count(many, protobuf_count.OTLP_LOG_RECORDS, 100) == 100  # stops where told
    assert protobuf_count.count(many[:-3], protobuf_count.OTLP_LOG_RECORDS, 10**9) <= 5000  # cut: no exception
    assert protobuf_count.count(b"\xff" * 40, protobuf_count.LOKI_ENTRIES, 10) == 0


@pytest.mark.parametrize("compression", [None, "lz4", "zstd"])
def test_an_arrow_stream_declares_its_rows_and_inflated_size(compression):
    table = pa.table({"msg": pa.array(["x" * 1000] * 2000), "level": pa.array(["INFO", "ERROR"] * 1000).dictionary_encode()})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression=compression)) as writer:
        writer.write_table(table.slice(0, 700))
        writer.write_table(table.slice(700))
    found = declared(sink.getvalue().to_pybytes())
    assert found.rows == 2000
    if compression is None:
        assert found.inflated == 0  # read in place
    else:
        assert table.nbytes <= found.inflated <= table.nbytes + 4096
