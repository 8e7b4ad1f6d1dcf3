"""Record tables → Parquet files: hour split, sort order, encodings.

Sort order within a compacted file: ``level, host, source_id, ts``. Measured on the generated corpus
(tests/helpers/corpus.py, 500k rows, zstd-3): it was the smallest of the orders tried (ts only
+16 %, level/host/ts +13 %, host/rank/ts +7 %, host/source_id/offset +1 %, level/host/logger/format/ts
+7 %) because a source's consecutive lines share templates and its `ts`/`offset` deltas are small,
and it puts the columns the common filters use
first, so row-group min/max statistics prune `level >= WARNING` and `host = …` queries to a few row
groups (the hour partition already bounds time). `trace_id` lookups use its dictionary page.

Flush files (the open hour, replaced by compaction once it closes) keep arrival order — already
close to time order per source, so time-range pruning works — because sorting costs more than the
Parquet encoding itself: on 262k corpus rows sorting and reordering took ~4 s against ~1.4 s for the
zstd-1 write.

Encodings: dictionary for the low-cardinality columns and `trace_id` (ids recur across ranks);
DELTA_BINARY_PACKED for the monotone integers `ts`, `offset`, `seq`; zstd everywhere (level 1 on
flush, where throughput matters; level 12 on compaction, which rewrites cold data once: −10 % size
for ~1.5× the time of level 3, while levels ≥ 15 cost 3–10× more for −2 to −5 %); statistics and the
page index on; row groups of 256k rows on flush and 2M rows on compaction (each row group repeats
the trace_id dictionary: on the 2M-row corpus 1M-row groups were 8 % smaller than 256k ones, and
one 2M-row group a further 2 % (trace_id 1.66 → 1.20 B/record); a ~128 MB compacted file holds
~6M rows, so 3 row groups, and with `level` sorted first a level filter still skips row groups).
Data pages: Parquet's default 1 MB on flush, 8 MB on compaction (zstd compresses each page on its
own; −0.8 % on the corpus, 32 MB gained nothing more). Compacted size on the 2M-row corpus,
zstd-12, B/record: 22.93 (1M groups, 1 MB pages) → 22.74 (8 MB pages) → 22.29 (and 2M groups),
against 45.3 for gzip -6 of the raw JSONL. The cost: coarser pruning inside a compacted hour
(a page index entry per 8 MB page), which time-range queries do not need (the hour partition
bounds them) and trace_id lookups do not use (the query side keeps its own trace index).
Statistics (and so page-index entries) are written for every column except the free text `msg`,
`exc` and `attrs`: min/max of free text never prunes a query (regex and substring filters cannot use
them), and skipping them saves ~6 % of the flush's CPU (1.59 → 1.50 CPU-s per million corpus rows,
median of 5).
Severe rows apart: compaction puts the ERROR and CRITICAL rows first and cuts a row group where
they end (:func:`severity_row_groups`), and stores a text skip index per row group
(:mod:`ranklog.text_index`), so a search for a failure message reads only the severe rows and a
`level >= ERROR` filter skips the bulk by statistics. Cost on the 2M-row corpus: 22.27 → 22.52
B/record (the second row group repeats the trace_id dictionary; the index itself is ~6 KB) and
+1.1 CPU-s per million records for the index.
Tried and rejected on the sorted corpus: BYTE_STREAM_SPLIT (ts 4.16 vs 3.97 B with delta; offset
1.83 vs 1.50) and PLAIN (4.49 / 2.08) for the integer columns. Sorting by source_id, ts would save
0.7 B on ts + offset, but source-first orders lose more on msg/attrs (host/source_id/offset: +1 %
overall, above).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .. import text_index
from ..archive_layout import COMPACTED_KEY, HOUR_NS, SEVERE_LEVELS
from ..record import DICTIONARY_FIELDS, FIELDS, TS_UNIT, ts_ns
from .storage import Storage

SORT_KEYS: tuple[str, ...] = ("level", "host", "source_id", "ts")
DICTIONARY_COLUMNS = [*DICTIONARY_FIELDS, "trace_id"]
DELTA_COLUMNS = {"ts": "DELTA_BINARY_PACKED", "offset": "DELTA_BINARY_PACKED", "seq": "DELTA_BINARY_PACKED"}
FREE_TEXT_COLUMNS = ("msg", "exc", "attrs")
STATISTICS_COLUMNS = [name for name in FIELDS if name not in FREE_TEXT_COLUMNS]
FLUSH_ROW_GROUP_ROWS = 256 * 1024
COMPACTION_ROW_GROUP_ROWS = 2 * 1024 * 1024
# Room for ~100k distinct trace ids per row group; past 1 MB (the default) Parquet falls back to
# plain encoding for the rest of the chunk, which doubled trace_id's size on the 2M-row corpus.
DICTIONARY_PAGE_LIMIT = 4 * 1024 * 1024
FLUSH_ZSTD_LEVEL = 1
COMPACTION_ZSTD_LEVEL = 12
# Parquet's default 1 MB data pages on flush (fine-grained page index for the open hour); 8 MB pages
# on compaction, where zstd then sees longer runs of similar messages (measured below).
FLUSH_PAGE_BYTES = 1024 * 1024
COMPACTION_PAGE_BYTES = 8 * 1024 * 1024


def hour_indices(table: pa.Table) -> np.ndarray:
    """Hours since the epoch (UTC) of every row's `ts`."""
    return np.floor_divide(ts_ns(table["ts"]), HOUR_NS)


def split_by_hour(table: pa.Table) -> Iterator[tuple[int, pa.Table]]:
    """(hour, its rows in arrival order) for every hour present; zero-copy when there is one hour."""
    if table.num_rows == 0:
        return
    hours = hour_indices(table)
    distinct = np.unique(hours)
    if len(distinct) == 1:
        yield int(distinct[0]), table
        return
    for hour in distinct.tolist():
        yield hour, table.filter(pa.array(hours == hour))


def _lexicographic_codes(column: pa.ChunkedArray) -> tuple[np.ndarray, int]:
    """Integer codes whose order is the strings' order, and how many distinct values there are."""
    encoded = pc.dictionary_encode(column.combine_chunks())
    rank = np.empty(len(encoded.dictionary), dtype=np.int64)
    rank[pc.sort_indices(encoded.dictionary).to_numpy()] = np.arange(len(encoded.dictionary))
    return rank[encoded.indices.to_numpy(zero_copy_only=False)], len(encoded.dictionary)


def _is_severe(table: pa.Table) -> np.ndarray:
    return pc.is_in(table["level"], pa.array(SEVERE_LEVELS)).to_numpy(zero_copy_only=False)


def sort_order(table: pa.Table) -> pa.Array:
    """Row order: rows at SEVERE_LEVELS first, then by SORT_KEYS. Sorting strings is slow, so the
    string keys become one dense integer rank and the rank and `ts` are packed into a single int64
    sorted by numpy; tables where that does not fit (ts spanning more than 2^42 µs ≈ 51 days, over 2M key
    combinations) use Arrow's sort."""
    ts = pc.cast(table["ts"], pa.int64()).to_numpy()
    if table.num_rows == 0:
        return pa.array([], pa.int64())
    span = int(ts.max()) - int(ts.min())
    mild = ~_is_severe(table)
    group = mild.astype(np.int64)
    for name in SORT_KEYS[:-1]:
        codes, distinct = _lexicographic_codes(table[name])
        group = group * distinct + codes
        group = np.unique(group, return_inverse=True)[1].ravel()
    if span < 1 << 42 and int(group.max()) < 1 << 21:
        return pa.array(np.argsort((group << 42) | (ts - ts.min()), kind="stable"))
    keyed = table.select(list(SORT_KEYS)).append_column("__mild", pa.array(mild))
    return pc.sort_indices(keyed, sort_keys=[("__mild", "ascending"), *((k, "ascending") for k in SORT_KEYS)])


def sort_records(table: pa.Table) -> pa.Table:
    return table.take(sort_order(table))


def severity_row_groups(table: pa.Table, row_group_rows: int) -> list[pa.Table]:
    """`table` (sorted) cut into row groups of ≤ `row_group_rows` rows, and wherever it changes
    from SEVERE_LEVELS to the others: the text index (ranklog.text_index) of the few ERROR and
    CRITICAL rows then differs from the bulk's, so a search for a failure message skips the bulk.

    Only this one cut: every row group repeats the trace_id dictionary, and trace ids span levels —
    one row group per level cost +1.13 B/record (+5 %) on bench_archive's corpus."""
    if table.num_rows == 0:
        return []
    severe = _is_severe(table)
    starts = [0, *(np.flatnonzero(severe[1:] != severe[:-1]) + 1).tolist()]
    ends = [*starts[1:], table.num_rows]
    return [table.slice(start, min(row_group_rows, end - start))
            for lo, end in zip(starts, ends, strict=True) for start in range(lo, end, row_group_rows)]


def write_parquet(storage: Storage, table: pa.Table, path: str, zstd_level: int = FLUSH_ZSTD_LEVEL,
                  row_group_rows: int = FLUSH_ROW_GROUP_ROWS, page_bytes: int = FLUSH_PAGE_BYTES,
                  compacted: bool = False) -> int:
    """Write `table` to `path` (a temp name) with the archive's settings, fsync it, return its size.

    `compacted` (a sorted compaction output) cuts row groups at level changes too, stores the text
    index of each row group, and marks the file (see :func:`is_compacted`)."""
    groups, footer = [table], {}
    if compacted:
        groups = severity_row_groups(table, row_group_rows)
        footer = {COMPACTED_KEY: b"1", text_index.METADATA_KEY: text_index.encode([text_index.build(g) for g in groups])}
    storage.make_parent(path)
    with storage.fs.open_output_stream(path) as sink, pq.ParquetWriter(
        sink, table.schema, compression="zstd", compression_level=zstd_level,
        use_dictionary=DICTIONARY_COLUMNS, column_encoding=DELTA_COLUMNS, write_statistics=STATISTICS_COLUMNS,
        write_page_index=True, dictionary_pagesize_limit=DICTIONARY_PAGE_LIMIT, data_page_size=page_bytes,
    ) as writer:
        for group in groups:
            writer.write_table(group, row_group_size=row_group_rows)
        if footer:  # the file's key-value metadata, not the Arrow schema's (which would hold it twice)
            writer.add_key_value_metadata(footer)
    storage.sync_file(path)
    return storage.fs.get_file_info(path).size or 0


def is_compacted(storage: Storage, path: str) -> bool:
    """Whether `path` is a compaction output of the current format (reads only the footer).

    A file of an older archive that stored `ts` in nanoseconds, or its text index as raw bytes (a
    footer Polars refuses), counts as not compacted, so the next compaction of its (closed) hour
    rewrites it in the current format: that is the migration."""
    with storage.fs.open_input_file(path) as source:
        parquet = pq.ParquetFile(source)
        metadata = parquet.metadata.metadata or {}
        names = parquet.schema_arrow.names
        current = "ts" in names and parquet.schema_arrow.field("ts").type.unit == TS_UNIT
    return metadata.get(COMPACTED_KEY) == b"1" and current and text_index.is_current(metadata)
