"""NUL-only regions and world-readable token files are a warning and a metric (issue 40 item 11).

NUL regions: ``sparse.log`` is 5 lines, a 256 MiB hole (``truncate``: a preallocated or sparse file),
5 lines; ``crashed.log`` is 5 lines, 1 MiB of written zero bytes (blocks a crash left unwritten), 5
lines. The agent must ship the 20 lines and no NUL record, count the NUL bytes in
``ranklog_agent_nul_bytes_skipped_total`` and log each file once — within seconds (a hole is passed
over with SEEK_DATA, not read).

Token files: the agent and the archive start with a token file of mode 0644; each logs a warning naming
it and sets ``ranklog_token_file_insecure`` to 1; after ``chmod 600`` the archive (which re-reads its
token file) goes back to 0. No token text appears in either log.
"""

from __future__ import annotations

import os
import time

import httpx
import pyarrow.compute as pc
import pytest

from tests.helpers.agent_proc import Scrape, running_agent
from tests.helpers.archive_proc import read_archive, running_archive
from tests.reliability.report import Row

pytestmark = pytest.mark.slow
HOLE, ZEROS = 256 * 1024**2, 1024**2


def _lines(tag: str, start: int) -> bytes:
    return "".join(f"2026-12-07 10:00:00,000 INFO {tag} line {i}\n" for i in range(start, start + 5)).encode()


def test_nul_regions_are_passed_over_and_exposed_token_files_reported(tmp_path, record_row):
    logs = tmp_path / "logs"
    logs.mkdir()
    sparse, crashed = logs / "sparse.log", logs / "crashed.log"
    with open(sparse, "wb") as handle:
        handle.write(_lines("sparse", 0))
        handle.truncate(5 * 52 + HOLE)
        handle.seek(0, os.SEEK_END)
        handle.write(_lines("sparse", 5))
    crashed.write_bytes(_lines("crashed", 0) + bytes(ZEROS) + _lines("crashed", 5))
    token = os.urandom(16).hex()
    tokens = tmp_path / "tokens"
    tokens.write_text(token + "\n")
    tokens.chmod(0o644)
    with running_archive(tmp_path / "archive", tokens, extra_args=("--flush-interval", "200ms")) as archive:
        archive_gauge = Scrape(httpx.get(f"{archive.url}/metrics", timeout=10).text).value(
            "ranklog_token_file_insecure")
        with running_agent([archive.url], tokens, tmp_path / "state", sources=[f"{logs}/*.log:text"]) as agent:
            started = time.monotonic()
            deadline = started + 60
            table = read_archive(archive.root)
            while table.num_rows < 20 and time.monotonic() < deadline:
                time.sleep(0.3)
                table = read_archive(archive.root)
            seconds = time.monotonic() - started
            time.sleep(1.0)
            table = read_archive(archive.root)
            scrape = agent.scrape()
            skipped = scrape.value("ranklog_agent_nul_bytes_skipped_total")
            agent_gauge = scrape.value("ranklog_token_file_insecure")
            agent_log = agent.log()
        tokens.chmod(0o600)
        time.sleep(1.5)  # the archive re-reads its token file (mode included) every 0.5 s
        fixed = Scrape(httpx.get(f"{archive.url}/metrics", timeout=10).text).value("ranklog_token_file_insecure")
        archive_log = archive.log_text()
    nul_records = int(pc.sum(pc.match_substring(table["msg"], "\x00")).as_py() or 0) if table.num_rows else 0
    lines = int(pc.sum(pc.match_substring(table["msg"], " line ")).as_py() or 0) if table.num_rows else 0
    warned = {name: sum(1 for line in agent_log.splitlines() if f"{logs / name} holds" in line)
              for name in ("sparse.log", "crashed.log")}
    token_warnings = ("token file" in agent_log and "chmod 600" in agent_log, "chmod 600" in archive_log)
    record_row(Row(
        "NUL regions and exposed token files", f"sparse.log: 5 lines, a {HOLE // 1024**2} MiB hole, 5 lines; "
        f"crashed.log: 5 lines, {ZEROS // 1024**2} MiB of zero bytes, 5 lines; agent and archive started with a "
        "0644 token file, later chmod 600", "the 20 lines archived, no NUL record, NUL bytes counted and each file "
        "logged once; token file: a warning in both logs, ranklog_token_file_insecure 1, then 0 after chmod 600; "
        "no token text in the logs",
        written=20, archived=lines, lost=20 - lines, notes=f"{lines} lines in {seconds:.1f} s, {nul_records} NUL "
        f"records; nul_bytes_skipped_total {skipped:,.0f}; warnings per file {warned}; token gauge agent "
        f"{agent_gauge:.0f}, archive {archive_gauge:.0f} → {fixed:.0f} after chmod; warnings (agent, archive) "
        f"{token_warnings}"))
    assert lines == 20 and nul_records == 0 and table.num_rows == 20
    assert skipped >= HOLE + ZEROS - 128 * 1024 and warned == {"sparse.log": 1, "crashed.log": 1}
    assert agent_gauge == 1 and archive_gauge == 1 and fixed == 0 and all(token_warnings)
    assert token not in agent_log and token not in archive_log
