"""The text skip index: sound (never rules out a row group that holds a literal), selective, and
written by compaction next to row groups that keep the severe rows apart."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from ranklog import text_index
from ranklog.archive.parquet_writer import (
    COMPACTION_PAGE_BYTES,
    SEVERE_LEVELS,
    is_compacted,
    sort_records,
    write_parquet,
)
from ranklog.archive.storage import Storage, temp_name
from ranklog.archive_layout import HOUR_NS
from ranklog.query import engine
from ranklog.query.filters import QuerySpec
from ranklog.query.sources import open_source
from ranklog.query.text_search import _indexed_out, search_literals
from ranklog.record import arrow_schema
from tests.helpers.corpus import generate

PAST_NS = 1_764_547_200 * 10**9  # 2025-12-01T00:00:00Z


def _strings(rng: random.Random, count: int) -> list[str]:
    alphabet = "abcdefghij klmnop=()[]:0123456789ÄéΩ✓"
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(count)]


def test_every_substring_of_every_value_is_reported_present():
    rng = random.Random(7)
    msgs, excs = _strings(rng, 300), _strings(rng, 300)
    table = pa.table({"msg": msgs, "exc": [e if i % 3 else None for i, e in enumerate(excs)]})
    bitmap = text_index.build(table)
    for value in msgs + excs[1::3]:
        data = value.encode()
        for start in range(len(data)):
            for end in range(start + 3, min(len(data), start + 12) + 1):
                assert text_index.may_contain(bitmap, [data[start:end]]), (value, data[start:end])


def test_absent_literals_are_ruled_out_and_short_ones_never():
    table = pa.table({"msg": ["loss=1.25 step 10", "loss=1.20 step 11"] * 100, "exc": pa.nulls(200, pa.string())})
    bitmap = text_index.build(table)
    assert not text_index.may_contain(bitmap, [b"Watchdog caught collective operation timeout"])
    assert not text_index.may_contain(bitmap, [b"loss=", b"NCCL error"])  # every literal must be present
    assert text_index.may_contain(bitmap, [b"loss=1.2", b"step 1"])
    assert text_index.may_contain(bitmap, [b"zz"])  # under three bytes: no trigram, no verdict
    assert text_index.may_contain(text_index.build(table.slice(0, 0)), [])


def test_encoding_round_trips_and_a_damaged_index_is_ignored():
    bitmaps = [text_index.build(pa.table({"msg": [f"row group {i}"]})) for i in range(3)]
    blob = text_index.encode(bitmaps)
    assert text_index.decode({text_index.METADATA_KEY: blob}) == bitmaps
    assert text_index.decode({text_index.METADATA_KEY: blob[:-1]}) is None
    assert text_index.decode({}) is None and text_index.decode(None) is None


def _write(tmp_path, table: pa.Table, compacted: bool) -> Storage:
    storage = Storage(str(tmp_path / ("compacted" if compacted else "flushed")), "t1")
    path = storage.new_file_path(PAST_NS // HOUR_NS)
    if compacted:
        write_parquet(storage, sort_records(table), temp_name(path), 12, 4000, COMPACTION_PAGE_BYTES, compacted=True)
    else:
        write_parquet(storage, table, temp_name(path))
    storage.rename(temp_name(path), path)
    return storage


def test_compaction_keeps_severe_rows_apart_with_an_index_per_row_group(tmp_path):
    table = generate(12_000, start_ns=PAST_NS, span_s=3000, hosts=2, ranks_per_host=4, seed=5).cast(arrow_schema())
    storage = _write(tmp_path, table, compacted=True)
    [stored] = storage.list_files(own_only=True)
    file = pq.ParquetFile(stored.path)
    assert is_compacted(storage, stored.path)
    bitmaps = text_index.decode(file.metadata.metadata)
    assert bitmaps is not None and len(bitmaps) == file.metadata.num_row_groups
    severe = [pc.all(pc.is_in(file.read_row_group(rg, columns=["level"])["level"], pa.array(SEVERE_LEVELS))).as_py()
              for rg in range(file.metadata.num_row_groups)]
    assert severe == sorted(severe, reverse=True) and True in severe and False in severe  # severe first, apart
    assert all(file.metadata.row_group(rg).num_rows <= 4000 for rg in range(file.metadata.num_row_groups))
    assert file.read().num_rows == table.num_rows


@pytest.mark.parametrize("spec", [
    QuerySpec(regex=r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=[0-9]+"),
    QuerySpec(contains="CUDA error"),
    QuerySpec(regex="loss[=:] ?[0-9]"),
    QuerySpec(contains="no such message anywhere"),
], ids=["severe-regex", "severe-substring", "bulk-regex", "absent"])
def test_indexed_search_answers_like_a_full_scan_and_skips_row_groups(tmp_path, spec):
    table = generate(12_000, start_ns=PAST_NS, span_s=3000, hosts=2, ranks_per_host=4, seed=5).cast(arrow_schema())
    compacted = _write(tmp_path, table, compacted=True)
    _write(tmp_path, table, compacted=False)
    order = [(k, "ascending") for k in ("host", "source_id", "offset")]
    indexed = engine.read(open_source(archive=str(tmp_path / "compacted")), spec).sort_by(order)
    scanned = engine.read(open_source(archive=str(tmp_path / "flushed")), spec).sort_by(order)
    assert indexed.equals(scanned)
    assert (indexed.num_rows > 0) == (spec.contains != "no such message anywhere")
    file = pq.ParquetFile(compacted.list_files(own_only=True)[0].path)
    skipped = _indexed_out(file, search_literals(spec))
    assert len(skipped) >= 1  # every spec above is absent from at least the bulk or the severe rows
    for row_group in skipped:  # and what was skipped really holds no match
        rows = file.read_row_group(row_group, columns=["msg", "exc"])
        literal = max(search_literals(spec), key=len).decode()
        assert not any(literal in (text or "") for text in rows["msg"].to_pylist() + rows["exc"].to_pylist())
