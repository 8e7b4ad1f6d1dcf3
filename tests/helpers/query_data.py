"""Build the same records as an archive (hive Parquet) and as a raw log directory, for query tests.

`write_raw_dir` writes the ranklog logger's files (its naming, one file per host/rank/pid) from a
corpus table; the query tests parse that directory with the agent's parsers and store the parsed
records with `write_archive`, so both sources hold exactly the same records.

`write_archive` writes the archive's layout (``date=YYYY-MM-DD/hour=HH/<archive-id>-<seq>.parquet``)
through the archive's own writer, so the files are what a running archive would flush.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy as np
import pyarrow as pa

from ranklog.archive.parquet_writer import (
    COMPACTION_PAGE_BYTES,
    COMPACTION_ROW_GROUP_ROWS,
    COMPACTION_ZSTD_LEVEL,
    FLUSH_ZSTD_LEVEL,
    sort_records,
    split_by_hour,
    write_parquet,
)
from ranklog.archive.storage import Storage, temp_name
from ranklog.record import arrow_schema
from tests.helpers.corpus import jsonl_lines


def write_archive(table: pa.Table, root: str | os.PathLike[str], archive_id: str = "a1",
                  files_per_hour: int = 1) -> list[Path]:
    """Store `table` under `root` through the archive's writer (temp file + rename, its encodings).

    One file per hour is what compaction leaves for a closed hour (sorted, high zstd level);
    `files_per_hour` > 1 leaves each hour as successive flushes would (arrival order).
    """
    storage = Storage(str(root), archive_id)
    written = []
    for hour, part in split_by_hour(table.cast(arrow_schema())):
        compacted = files_per_hour == 1
        if compacted:
            pieces, level = [sort_records(part)], COMPACTION_ZSTD_LEVEL
        else:
            bounds = np.linspace(0, part.num_rows, files_per_hour + 1).astype(int)
            pieces, level = [part.slice(lo, hi - lo) for lo, hi in itertools.pairwise(bounds)
                             if hi > lo], FLUSH_ZSTD_LEVEL
        for piece in pieces:
            path = storage.new_file_path(hour)
            temp = temp_name(path)
            if compacted:
                write_parquet(storage, piece, temp, level, COMPACTION_ROW_GROUP_ROWS, COMPACTION_PAGE_BYTES,
                              compacted=True)
            else:
                write_parquet(storage, piece, temp, zstd_level=level)
            storage.rename(temp, path)
            written.append(Path(path))
    return written


def write_raw_dir(table: pa.Table, root: str | os.PathLike[str], job: str = "job1") -> list[Path]:
    """The records as the ranklog logger writes them: ``<root>/<job>/<host>/rank-R.pid-P.0000.jsonl``."""
    root = Path(root)
    ordered = table.sort_by([("host", "ascending"), ("rank", "ascending"), ("pid", "ascending"), ("ts", "ascending")])
    lines = jsonl_lines(ordered).to_pylist()
    hosts = ordered["host"].to_pylist()
    ranks = ordered["rank"].to_pylist()
    pids = ordered["pid"].to_pylist()
    files: dict[Path, list[str]] = {}
    for line, host, rank, pid in zip(lines, hosts, ranks, pids, strict=True):
        path = root / job / host / f"rank-{rank if rank is not None else 'x'}.pid-{pid}.0000.jsonl"
        files.setdefault(path, []).append(line)
    for path, content in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(content), encoding="utf-8")
    return list(files)
