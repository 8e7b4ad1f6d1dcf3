"""Read an archive in a SeaweedFS bucket the way an outside tool does: pyarrow.dataset over S3,
hive partitions, with its own S3FileSystem (not ranklog's code, so it checks what ranklog wrote)."""

from __future__ import annotations

import contextlib
import time

import pyarrow as pa

from tests.helpers.seaweedfs import SeaweedFS


def s3_filesystem(seaweedfs: SeaweedFS, endpoint: str | None = None):
    import pyarrow.fs as pafs

    return pafs.S3FileSystem(access_key=seaweedfs.access_key, secret_key=seaweedfs.secret_key,
                             region=seaweedfs.region, scheme="http",
                             endpoint_override=(endpoint or seaweedfs.endpoint).split("://", 1)[1])


def read_s3_archive(seaweedfs: SeaweedFS, root: str) -> pa.Table:
    """Every record under `root` (``s3://bucket/prefix``), as DuckDB or Spark would see the hive layout."""
    import pyarrow.dataset as ds
    import pyarrow.fs as pafs

    from ranklog.record import arrow_schema

    filesystem = s3_filesystem(seaweedfs)
    base = root.removeprefix("s3://").rstrip("/")
    files = [info.path for info in filesystem.get_file_info(pafs.FileSelector(base, recursive=True,
                                                                             allow_not_found=True))
             if info.type == pafs.FileType.File and info.path.endswith(".parquet") and "/date=" in info.path
             and not any(part.startswith((".", "_")) for part in info.path[len(base):].split("/"))]
    if not files:
        return arrow_schema().empty_table()
    return ds.dataset(files, filesystem=filesystem, format="parquet", schema=arrow_schema()).to_table()


def wait_s3_rows(seaweedfs: SeaweedFS, root: str, expected: int, timeout: float = 30.0) -> pa.Table:
    """The bucket's records once it holds at least `expected` rows (flushes are asynchronous)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            table = read_s3_archive(seaweedfs, root)
        except (FileNotFoundError, OSError):  # an input deleted by a compaction commit while listing
            table = None
        if table is not None and (table.num_rows >= expected or time.monotonic() > deadline):
            return table
        if time.monotonic() > deadline:
            return read_s3_archive(seaweedfs, root)
        time.sleep(0.2)


# Archive flags for fleet tests: flush objects stay as they are, or closed hours are compacted at once
# with a short lease (a dead owner's hour is free again after 3 s).
QUIET = ("--compaction-delay", "100d")
COMPACTING = ("--compaction-delay", "0s", "--compaction-interval", "200ms", "--s3-lease-ttl", "3s")


@contextlib.contextmanager
def s3_fleet(tmp_path, token_file, seaweedfs: SeaweedFS, root: str, ids, *flags: str):
    """Archives with ids `ids` on one s3:// root, each with its own local state dir (all stopped on exit)."""
    from tests.helpers.archive_proc import running_archive

    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(running_archive(
            root, token_file, log_path=tmp_path / f"{archive_id}.log", env=seaweedfs.env(),
            extra_args=["--archive-id", archive_id, "--state-dir", str(tmp_path / archive_id),
                        "--flush-interval", "100ms", *flags])) for archive_id in ids]


def hour_parquet_keys(seaweedfs: SeaweedFS, root: str, hour: int) -> list[str]:
    """Visible Parquet object keys of one hour partition (hours since the epoch) under `root`."""
    from ranklog.archive_layout import partition_dir

    bucket, prefix = root.removeprefix("s3://").split("/", 1)
    return [key for key in seaweedfs.keys(bucket, f"{prefix}/{partition_dir(hour)}/") if key.endswith(".parquet")
            and not key.rpartition("/")[2].startswith(".")]
