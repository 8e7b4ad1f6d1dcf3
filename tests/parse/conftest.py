"""Shared helpers for the parser tests: contexts, feeding like the agent does, rows without ns→datetime pain."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pyarrow as pa
import pytest

from ranklog.parse import SourceContext, parse
from ranklog.record import arrow_schema, ts_ns

READ_TIME_NS = 1_796_220_000_123_456_789  # 2026-12-02T12:40:00.123456789Z: "no timestamp in the line"
# what the archive keeps of it: `ts` is stored in microseconds
READ_TIME_STORED = READ_TIME_NS // 1000 * 1000


def make_ctx(fmt: str, fields: dict[str, Any] | None = None, options: dict[str, Any] | None = None,
             source: str = "/logs/x.log") -> SourceContext:
    return SourceContext(source=source, source_id="sid-1", format=fmt, host="node1", ip="10.0.0.1",
                         fields=dict(fields or {}), state={}, options=dict(options or {}))


def rows(table: pa.Table | pa.RecordBatch) -> list[dict[str, Any]]:
    """Rows as dicts with `ts` as integer nanoseconds (stored in µs, so the last 3 digits are 0)."""
    ts = ts_ns(table.column("ts")).tolist()
    out = table.drop_columns(["ts"]).to_pylist()
    for row, value in zip(out, ts, strict=True):
        row["ts"] = value
    return out


def json_lines(fmt: str, mapping) -> Callable[[bytes, int], tuple[list[dict[str, Any]], int]]:
    """(data, base offset) → (rows, parse errors) of the JSON bulk parser with `mapping`, times not inferred."""
    from ranklog.parse import json_bulk

    def run(data: bytes, base: int = 0) -> tuple[list[dict[str, Any]], int]:
        result = json_bulk.parse_json_lines(data, base, make_ctx(fmt), final=True, read_time_ns=READ_TIME_NS,
                                            mapping=mapping, infer_time=False)
        return rows(result.batch), result.errors
    return run


def each_line_alone(parse_lines: Callable[[bytes, int], tuple[list[dict[str, Any]], int]],
                    lines: list[bytes]) -> tuple[list[dict[str, Any]], int]:
    """The oracle of a bulk parser: each line parsed on its own (a block of one line takes the line path)."""
    got, errors, offset = [], 0, 0
    for line in lines:
        one, err = parse_lines(line + b"\n", offset)
        got += one
        errors += err
        offset += len(line) + 1
    return got, errors


def parse_whole(data: bytes, ctx: SourceContext, base_offset: int = 0) -> tuple[pa.Table, int]:
    """One call with final=True: (records, parse errors). Everything must be consumed."""
    result = parse(data, base_offset, ctx, final=True, read_time_ns=READ_TIME_NS)
    assert result.consumed == len(data)
    assert result.batch.schema == arrow_schema()
    return pa.Table.from_batches([result.batch], schema=arrow_schema()), result.errors


def feed_chunks(data: bytes, ctx: SourceContext, sizes: Iterable[int]) -> tuple[pa.Table, int]:
    """Feed `data` as the agent does: read blocks of `sizes`, re-offer the unconsumed rest, final at EOF."""
    batches, errors, offset, pos, carry = [], 0, 0, 0, b""
    for size in sizes:
        if pos >= len(data):
            break
        block = data[pos:pos + size]
        pos += len(block)
        buffer = carry + block
        result = parse(buffer, offset, ctx, final=False, read_time_ns=READ_TIME_NS)
        assert 0 <= result.consumed <= len(buffer)
        batches.append(result.batch)
        errors += result.errors
        offset += result.consumed
        carry = buffer[result.consumed:]
    buffer = carry + data[pos:]
    result = parse(buffer, offset, ctx, final=True, read_time_ns=READ_TIME_NS)
    assert result.consumed == len(buffer)
    batches.append(result.batch)
    errors += result.errors
    return pa.Table.from_batches(batches, schema=arrow_schema()), errors


@pytest.fixture
def ctx_factory():
    return make_ctx
