"""Fixtures for the archive tests: a factory for real `ranklog archive` processes, small corpora."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pyarrow as pa
import pytest

from tests.helpers.archive_proc import ArchiveHandle, running_archive
from tests.helpers.corpus import generate

# Two days ago, on an hour boundary: its hours are closed (compaction) and within default retention.
PAST_NS = (int(time.time()) // 3600 - 48) * 3600 * 1_000_000_000


@pytest.fixture
def start_archive(tmp_path: Path, token_file: Path):
    """`start_archive(*flags, root=None)` → a running archive; all are stopped at teardown."""
    stack = contextlib.ExitStack()

    def start(*flags: str, root: Path | None = None) -> ArchiveHandle:
        return stack.enter_context(running_archive(root or tmp_path / "archive", token_file,
                                                   extra_args=["--archive-id", "t1", *flags]))

    with stack:
        yield start


@pytest.fixture(scope="session")
def small_corpus() -> pa.Table:
    """4,000 records over two hours from 2 hosts × 4 ranks."""
    return generate(4000, start_ns=PAST_NS, span_s=7200, hosts=2, ranks_per_host=4, seed=7)
