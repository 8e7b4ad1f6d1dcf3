"""Multi-line records end to end: tracebacks join their record, a pending record is flushed when quiet."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pytest

from tests.agent.scripted_archive import scripted_archive
from tests.helpers.agent_proc import running_agent

pytestmark = pytest.mark.slow

FIRST = b"""2026-12-02 12:00:00,123 - trainer - INFO - step 1 done
2026-12-02 12:00:01,000 - trainer - ERROR - step 2 failed
Traceback (most recent call last):
  File "train.py", line 3, in <module>
    main()
RuntimeError: CUDA error: an illegal memory access was encountered
"""
SECOND = b"""2026-12-02 12:00:02,000 - trainer - \x1b[31mWARNING\x1b[0m - retrying
  continuation line
"""


def test_traceback_joins_its_record_and_the_last_record_is_flushed(tmp_path: Path, token_file: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    path = logs / "worker.log"
    path.write_bytes(FIRST)
    with scripted_archive() as archive, running_agent([archive.url], token_file, tmp_path / "state",
                                                      sources=[f"{logs}/*.log:python"]) as agent:
        # The traceback may continue: its record ships once the file stays quiet (idle_final, 0.5 s).
        scrape = agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 2, timeout=30)
        with path.open("ab") as handle:
            handle.write(SECOND)
        written = time.monotonic()
        scrape = agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 3, timeout=30)
        assert time.monotonic() - written < 10
        scrape = agent.wait_idle()
    table = pa.concat_tables(archive.tables)
    rows = sorted(table.select(["offset", "level", "msg", "exc", "logger"]).to_pylist(), key=lambda r: r["offset"])
    assert [r["level"] for r in rows] == ["INFO", "ERROR", "WARNING"]
    assert rows[1]["exc"].startswith("Traceback (most recent call last):")
    assert rows[1]["exc"].endswith("RuntimeError: CUDA error: an illegal memory access was encountered")
    assert rows[2]["offset"] == len(FIRST) and rows[2]["msg"] == "retrying\n  continuation line"
    assert scrape.value("ranklog_failure_signatures_total", signature="cuda_error") == 1
    assert scrape.value("ranklog_agent_bytes_read_total") == len(FIRST) + len(SECOND)
