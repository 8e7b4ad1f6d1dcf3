"""Fixtures of the agent tests: a real archive, reading it back, log writer processes."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from tests.helpers.procs import REPO, spawn, stop


def archived(root: Path, columns: tuple[str, ...] = ("source_id", "offset", "msg", "seq")) -> pa.Table:
    """Every record stored under an archive root (hive-partitioned Parquet), read with pyarrow.dataset."""
    files = [p for p in root.rglob("*.parquet") if not any(part.startswith((".", "_")) for part in p.parts[-3:])]
    if not files:
        return pa.table({name: pa.array([], pa.string()) for name in columns})
    dataset = ds.dataset([str(p) for p in files], format="parquet")
    return dataset.to_table(columns=list(columns))


def wait_archived(root: Path, expected: int, timeout: float = 60.0, columns=("source_id", "offset", "msg", "seq")) -> pa.Table:
    """Wait until the archive holds `expected` records (flushes are asynchronous), then one more flush period."""
    deadline = time.monotonic() + timeout
    table = archived(root, columns)
    while table.num_rows < expected and time.monotonic() < deadline:
        time.sleep(0.3)
        table = archived(root, columns)
    time.sleep(1.5)  # a late duplicate would show up in the next flush
    return archived(root, columns)


def assert_exactly_once(table: pa.Table, expected_seqs: set[int]) -> None:
    keys = list(zip(table.column("source_id").to_pylist(), table.column("offset").to_pylist(), strict=True))
    assert len(keys) == len(set(keys)), "duplicate (source_id, offset) in the archive"
    seqs = table.column("seq").to_pylist()
    duplicates = len(seqs) - len(set(seqs))
    missing = expected_seqs - set(seqs)
    assert duplicates == 0 and not missing, f"{duplicates} duplicated, {len(missing)} missing (e.g. {sorted(missing)[:5]})"


@pytest.fixture
def archive(tmp_path: Path, token_file: Path) -> Iterator:
    from tests.helpers.archive_proc import running_archive

    with running_archive(tmp_path / "archive", token_file) as handle:
        yield handle


def start_writer(path: Path, *args: str, log_dir: Path):
    """`tests.agent.writer` as a real process (see its docstring)."""
    return spawn([sys.executable, "-m", "tests.agent.writer", str(path), *args], log_path=log_dir / "writer.out",
                 cwd=str(REPO))


def finish(proc, timeout: float = 120.0) -> None:
    try:
        assert proc.wait(timeout=timeout) == 0, "writer failed"
    finally:
        stop(proc)
