"""A JSON block read by pyarrow's thread pool in parts gives the records of a one-thread read.

The parts are inferred separately and unified by pyarrow; a part that disagrees (a known field
with another type, a line that is not JSON) must still fall back exactly as the whole block does.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from ranklog.parse import SourceContext, json_bulk, parse
from tests.helpers.corpus import generate, write_jsonl


def _records(data: bytes, cpus: int) -> pa.Table:
    before = pa.cpu_count()
    pa.set_cpu_count(cpus)
    try:
        ctx = SourceContext(source="/x/rank-0.jsonl", source_id="h:1:2:ab", format="ranklog", host="h", ip="127.0.0.1")
        result = parse(data, 0, ctx, final=True, read_time_ns=1_796_212_800 * 10**9)
    finally:
        pa.set_cpu_count(before)
    assert result.consumed == len(data)
    return pa.Table.from_batches([result.batch])


@pytest.fixture(scope="module")
def jsonl(tmp_path_factory) -> bytes:
    """~4 MB of varied ranklog JSON lines (extras, tracebacks, verl metrics) with foreign lines spread
    through it: wrong-typed known fields, a line that is not JSON, an array, a missing timestamp."""
    out = tmp_path_factory.mktemp("jsonl")
    files = write_jsonl(generate(12_000, hosts=1), out)
    lines = b"".join(Path(f).read_bytes() for f in files).splitlines(keepends=True)
    odd = [b'{"ts":"2026-12-02T12:00:00Z","level":"INFO","msg":"rank as text","rank":"seven"}\n',
           b"Traceback (most recent call last): not JSON at all\n",
           b'[1, 2, 3]\n',
           b'{"level":"ERROR","msg":"no time here","step":12}\n',
           b'{"ts":12345,"level":5,"msg":["a","list"],"pid":1.5}\n']
    for position, extra in zip(range(700, len(lines), len(lines) // 6), odd, strict=False):
        lines.insert(position, extra)
    data = b"".join(lines)
    assert len(data) > 4 * json_bulk._MIN_THREAD_BLOCK  # read in parts when threads are allowed
    return data


def test_threaded_read_gives_the_one_thread_records(jsonl: bytes, monkeypatch) -> None:
    one = _records(jsonl, 1)
    assert one.num_rows == jsonl.count(b"\n")
    threaded: list[bool] = []
    options = json_bulk._read_options
    monkeypatch.setattr(json_bulk, "_read_options", lambda size: threaded.append(options(size).use_threads)
                        or options(size))
    for cpus in (2, 4):
        assert _records(jsonl, cpus).equals(one)
    assert any(threaded) and not all(threaded)  # parts read by threads, the bisected small blocks by one


def test_options_split_only_large_blocks() -> None:
    before = pa.cpu_count()
    pa.set_cpu_count(4)
    try:
        assert not json_bulk._read_options(json_bulk._MIN_THREAD_BLOCK).use_threads
        big = json_bulk._read_options(3 * json_bulk._MIN_THREAD_BLOCK)
        assert big.use_threads and big.block_size == json_bulk._MIN_THREAD_BLOCK + 1
    finally:
        pa.set_cpu_count(before)
    pa.set_cpu_count(1)
    try:
        assert not json_bulk._read_options(100 * json_bulk._MIN_THREAD_BLOCK).use_threads
    finally:
        pa.set_cpu_count(before)
