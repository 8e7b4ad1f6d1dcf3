"""Write records as an archive would store them: hive-partitioned, zstd Parquet, one file per hour."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


def write_archive(table: pa.Table, root: Path, archive_id: str = "arch0") -> list[Path]:
    """`table` under `root/date=YYYY-MM-DD/hour=HH/<archive_id>-<n>.parquet`, sorted by time."""
    table = table.sort_by([("ts", "ascending")])
    hours = pc.strftime(table.column("ts"), format="%Y-%m-%d/%H")
    written = []
    for n, key in enumerate(sorted(set(hours.to_pylist()))):
        date, hour = key.split("/")
        part = table.filter(pc.equal(hours, key))
        directory = root / f"date={date}" / f"hour={hour}"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{archive_id}-{n:06d}.parquet"
        pq.write_table(part, path, compression="zstd")
        written.append(path)
    return written
