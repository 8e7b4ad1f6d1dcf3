"""Shared data for the query tests: one corpus as a raw log directory and as an archive.

The raw directory holds the ranklog logger's files; it is parsed once with the agent's parsers and
the parsed records are stored as the archive, so both sources hold exactly the same records.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from tests.helpers.corpus import generate
from tests.helpers.query_data import write_archive, write_raw_dir

START_NS = 1_759_305_600 * 1_000_000_000  # 2025-10-01T08:00:00Z
SPAN_S = 6 * 3600


@pytest.fixture(scope="session")
def raw_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    table = generate(12_000, start_ns=START_NS - 2 * 3600 * 10**9, span_s=SPAN_S, hosts=3, ranks_per_host=4, seed=5)
    root = tmp_path_factory.mktemp("raw") / "logs"
    write_raw_dir(table, root)
    return root


@pytest.fixture(scope="session")
def parsed(raw_dir: Path) -> pa.Table:
    """The raw directory as the agent's parsers read it (the records both sources hold)."""
    from ranklog.parse.directory import read_log_dir

    table = read_log_dir(str(raw_dir))
    assert table.num_rows == 12_000
    return table


@pytest.fixture(scope="session")
def archive_root(parsed: pa.Table, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("archive")
    write_archive(parsed, root, files_per_hour=2)
    return root


@pytest.fixture(scope="session")
def everyday_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """(log directory, archive root, trace id) of a small real job written now (tests.helpers.everyday_job)."""
    from tests.helpers.everyday_job import job_logs_and_archive

    return job_logs_and_archive(tmp_path_factory.mktemp("everyday"))
