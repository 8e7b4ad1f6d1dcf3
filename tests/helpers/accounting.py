"""Count what a fault scenario lost or duplicated: writer `seq` numbers against archive rows.

The writers (tests.helpers.seq_writer) number their lines 1..N per process; the archive is read
back with pyarrow.dataset over one or more archive roots (their union is what query reads).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds


@dataclass
class Tally:
    written: int
    archived: int  # rows found, duplicates included
    lost: int  # written seq numbers with no row
    duplicated: int  # rows beyond the first for the same (host, pid, seq)

    @property
    def exact(self) -> bool:
        return self.lost == 0 and self.duplicated == 0 and self.archived == self.written


Root = Path | tuple  # a local directory, or (pyarrow FileSystem, path) for an object store


def _has_parquet(root: Root) -> bool:
    if not isinstance(root, tuple):
        return any(Path(root).rglob("*.parquet"))
    import pyarrow.fs as pafs

    filesystem, path = root
    return any(info.path.endswith(".parquet") for info in
               filesystem.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True)))


def archived_rows(roots: Iterable[Root], job: str) -> pa.Table:
    """host, pid, seq, source_id, offset of every archived row of `job` (Parquet files only)."""
    tables = []
    for root in roots:
        if not _has_parquet(root):
            continue
        filesystem, path = root if isinstance(root, tuple) else (None, str(root))
        dataset = ds.dataset(path, filesystem=filesystem, format="parquet", partitioning="hive",
                             exclude_invalid_files=True)
        # rows without seq are not writer lines (e.g. the agent's loss notices): not counted
        tables.append(dataset.to_table(columns=["host", "pid", "seq", "source_id", "offset"],
                                       filter=(ds.field("job") == job) & ds.field("seq").is_valid()))
    if not tables:
        return pa.table({"host": pa.array([], pa.string()), "pid": pa.array([], pa.int32()),
                         "seq": pa.array([], pa.int64()), "source_id": pa.array([], pa.string()),
                         "offset": pa.array([], pa.int64())})
    return pa.concat_tables(tables)


def wal_rows(state_dir: Path, job: str) -> pa.Table:
    """host, pid, seq, source_id, offset of the rows of `job` still held in an archive's WAL — what it
    acknowledged and had not flushed to Parquet yet (it flushes them when it starts again)."""
    from ranklog.archive.ingest import decode
    from ranklog.archive.wal import Wal

    columns = ["host", "pid", "seq", "source_id", "offset"]
    tables = [decode(entry.body, entry.content_type, entry.encoding, entry.received_ns, 1 << 30)
              for entry in Wal(str(Path(state_dir) / "wal"), 1 << 30).replay()]
    tables = [t.filter(pc.equal(t["job"], job)).select(columns) for t in tables]
    return pa.concat_tables(tables) if tables else archived_rows([], job)


def tally(roots: Sequence[Root], job: str, written: dict[tuple[str, int], int],
          extra: Sequence[pa.Table] = ()) -> Tally:
    """Compare the archive (plus `extra` rows, e.g. a stopped archive's WAL) with `written`
    ({(host, pid): lines written})."""
    tables = [archived_rows(roots, job), *extra]
    schema = pa.schema([field.with_nullable(True) for field in tables[0].schema])  # files and WAL differ in nullability
    rows = pa.concat_tables([table.cast(schema) for table in tables])
    keys = rows.group_by(["host", "pid", "seq"]).aggregate([([], "count_all")])
    distinct_found = 0
    for (host, pid), count in written.items():
        mask = pc.and_(pc.and_(pc.equal(keys["host"], host), pc.equal(keys["pid"], pid)),
                       pc.and_(pc.greater_equal(keys["seq"], 1), pc.less_equal(keys["seq"], count)))
        distinct_found += pc.sum(mask.cast(pa.int64())).as_py() or 0
    total_written = sum(written.values())
    return Tally(written=total_written, archived=rows.num_rows, lost=total_written - distinct_found,
                 duplicated=rows.num_rows - keys.num_rows)


def wait_for_archive(roots: Sequence[Root], job: str, written: dict[tuple[str, int], int],
                     timeout: float = 90.0, extra: Sequence[pa.Table] = ()) -> tuple[Tally, float]:
    """Poll until every written line is archived (or `timeout`); returns the tally and seconds waited."""
    start = time.monotonic()
    result = tally(roots, job, written, extra)
    while result.lost and time.monotonic() - start < timeout:
        time.sleep(0.5)
        result = tally(roots, job, written, extra)
    return result, time.monotonic() - start
