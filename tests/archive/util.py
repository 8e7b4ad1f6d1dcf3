"""Small helpers shared by the archive tests."""

from __future__ import annotations

import ssl
import time
from pathlib import Path

import httpx
import pyarrow as pa

from tests.helpers.archive_proc import ARROW, ArchiveHandle, arrow_body, read_archive

KEY = [("source_id", "ascending"), ("offset", "ascending")]


def post(archive: ArchiveHandle, body: bytes, content_type: str = ARROW, **headers: str) -> httpx.Response:
    verify = ssl.create_default_context(cafile=archive.ca_file) if archive.ca_file else True
    return httpx.post(f"{archive.url}/v1/ingest", content=body, headers=archive.headers(content_type, **headers),
                      timeout=60, verify=verify)


def post_table(archive: ArchiveHandle, table: pa.Table, compression: str | None = "zstd") -> dict:
    answer = post(archive, arrow_body(table, compression))
    assert answer.status_code == 200, answer.text
    return answer.json()


def wait_rows(root: Path, expected: int, timeout: float = 15.0) -> pa.Table:
    """The archive's Parquet content once it holds `expected` rows (flushes are asynchronous)."""
    deadline = time.monotonic() + timeout
    table = _read(root)
    while (table is None or table.num_rows < expected) and time.monotonic() < deadline:
        time.sleep(0.1)
        table = _read(root)
    return table if table is not None else read_archive(root)


def _read(root: Path) -> pa.Table | None:
    try:
        return read_archive(root)
    except FileNotFoundError:  # a file was listed, then replaced by a flush/compaction commit
        return None


def by_key(table: pa.Table) -> pa.Table:
    return table.sort_by(KEY)


def metric(archive: ArchiveHandle, name: str, labels: str = "") -> float:
    text = httpx.get(f"{archive.url}/metrics", timeout=10).text
    wanted = f"{name}{{{labels}}}" if labels else name
    for line in text.splitlines():
        if line.startswith(wanted + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"metric {wanted} not exported")
