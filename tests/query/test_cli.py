"""The commands as a user runs them: real processes, exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from tests.helpers.procs import REPO, ranklog_cmd

REFERENCE = ["--start_time", "2025-10-01 08:00:00", "--end_time", "2025-10-01 12:00:00", "--level", "ERROR"]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(ranklog_cmd(*args), capture_output=True, text=True, timeout=120, cwd=cwd or REPO)


def _one_clear_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def _read_csv(path: Path) -> pa.Table:
    return pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(column_types={"ts": pa.string()}))


def test_reference_invocation_from_log_dir_and_archive(raw_dir, archive_root, tmp_path):
    """`ranklog diagnose … --output error_analysis.csv`, exactly as written, from both sources."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    logs = tmp_path / "a" / "logs"
    logs.symlink_to(raw_dir)
    from_dir = run("diagnose", "--log_dir", "./logs", *REFERENCE, "--output", "error_analysis.csv", cwd=tmp_path / "a")
    assert from_dir.returncode == 0, from_dir.stderr
    from_archive = run("diagnose", "--archive", str(archive_root), *REFERENCE, "--output", "error_analysis.csv",
                       cwd=tmp_path / "b")
    assert from_archive.returncode == 0, from_archive.stderr
    left = (tmp_path / "a" / "error_analysis.csv").read_bytes()
    assert left == (tmp_path / "b" / "error_analysis.csv").read_bytes()
    table = _read_csv(tmp_path / "a" / "error_analysis.csv")
    assert table.num_rows > 0
    assert set(table["level"].to_pylist()) <= {"ERROR", "CRITICAL"}
    assert min(table["ts"].to_pylist()) >= "2025-10-01T08:00:00" and max(table["ts"].to_pylist()) < "2025-10-01T12"
    assert f"wrote {table.num_rows} records" in from_dir.stderr


def test_count_limit_format_and_sort(archive_root):
    count = run("query", "--archive", str(archive_root), "--level", "ERROR", "--rank", "0-3", "--count")
    assert count.returncode == 0
    total = int(count.stdout.strip())
    assert total > 10
    newest = run("query", "--archive", str(archive_root), "--level", "ERROR", "--rank", "0-3", "--limit", "5",
                 "--sort", "ts:desc", "--format", "ndjson", "--columns", "ts,rank,level")
    rows = [json.loads(line) for line in newest.stdout.splitlines()]
    assert len(rows) == 5 and [r["ts"] for r in rows] == sorted((r["ts"] for r in rows), reverse=True)
    assert all(set(r) == {"ts", "rank", "level"} and 0 <= r["rank"] <= 3 for r in rows)
    table = run("query", "--archive", str(archive_root), "--level", "CRITICAL", "--limit", "3", "--format", "table")
    assert table.returncode == 0 and "3 records" in table.stdout and "CRITICAL" in table.stdout


def test_empty_result_exits_1_with_header_only_csv(archive_root, tmp_path):
    """Nothing matched: the file is still written (a header), stderr says so, and the exit status is 1
    (grep's rule, docs/cli.md), for an export and a count alike."""
    out = tmp_path / "none.csv"
    proc = run("query", "--archive", str(archive_root), "--contains", "never logged 51c2", "--output", str(out))
    assert proc.returncode == 1 and "wrote 0 records" in proc.stderr and "no records matched" in proc.stderr
    assert out.read_text().splitlines() == [out.read_text().splitlines()[0]]
    count = run("query", "--archive", str(archive_root), "--contains", "never 51c2", "--count")
    assert count.stdout.strip() == "0" and count.returncode == 1


@pytest.mark.parametrize("args, message", [
    (["query", "--archive", "/nonexistent/archive"], "no such directory"),
    (["query", "--log_dir", "/nonexistent/logs"], "no such directory"),
    (["query", "--archive", "{archive}", "--start", "2025-10-02", "--end", "2025-10-01"], "end must be after start"),
    (["query", "--archive", "{archive}", "--start", "tomorrow-ish"], "bad --start"),
    (["query", "--archive", "{archive}", "--rank", "7-3"], "bad --rank"),
    (["query", "--archive", "{archive}", "--regex", "(x"], "bad --regex"),
    (["query", "--archive", "{archive}", "--output", "x.xlsx"], "unknown extension"),
    (["query"], "exactly one of --archive"),
    (["query", "--archive", "{archive}", "--log_dir", "{archive}"], "exactly one of --archive"),
    (["query", "--archive", "{archive}", "--no-such-flag"], "unrecognized arguments"),
])
def test_user_errors_are_one_line(args, message, archive_root):
    proc = run(*[a.format(archive=archive_root) for a in args])
    assert message in _one_clear_line(proc)


def test_unreadable_directory(tmp_path):
    import os

    if os.geteuid() == 0:
        locked = tmp_path / "file-not-dir"
        locked.write_text("x")
        assert "not a directory" in _one_clear_line(run("query", "--log_dir", str(locked)))
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0)
        assert "permission denied" in _one_clear_line(run("query", "--log_dir", str(locked)))
