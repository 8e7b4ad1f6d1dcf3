"""Empty answers say what was searched and where the data is, with an exit status scripts can use:
1 when nothing matched (grep's rule), 2 when the source is the wrong kind (ranklog.query.nothing_found,
ranklog.query.sources)."""

from __future__ import annotations

import subprocess

import pytest

from tests.helpers.procs import ranklog_cmd


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(ranklog_cmd(*args), capture_output=True, text=True, timeout=180)


def one_line(proc: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_a_raw_folder_given_as_archive_names_the_right_flag(everyday_job):
    logs, _, _ = everyday_job
    proc = run("query", "--archive", str(logs))
    assert proc.returncode == 2 and f"read it with --log_dir {logs}" in one_line(proc)


def test_an_archive_given_as_log_dir_names_the_right_flag(everyday_job):
    _, archive, _ = everyday_job
    proc = run("triage", "--log_dir", str(archive))
    assert proc.returncode == 2 and f"read it with --archive {archive}" in one_line(proc)


def test_an_address_without_scheme_suggests_http(tmp_path):
    proc = run("query", "--archive", "127.0.0.1:18470")
    assert proc.returncode == 2 and "did you mean http://127.0.0.1:18470" in one_line(proc)


def test_an_empty_folder_says_it_holds_no_log(tmp_path):
    (tmp_path / "notes.csv").write_text("a,b\n")
    proc = run("query", "--log_dir", str(tmp_path))
    assert proc.returncode == 1 and proc.stdout == ""
    assert "no file ranklog reads as a log" in one_line(proc)


def test_an_empty_archive_says_nothing_was_shipped_yet(tmp_path):
    proc = run("query", "--archive", str(tmp_path), "--count")
    assert proc.returncode == 1 and proc.stdout.strip() == "0"
    assert "holds no data yet" in one_line(proc)


@pytest.mark.parametrize("kind", ["archive", "log_dir"])
def test_a_window_without_data_names_the_span_the_source_holds(kind, everyday_job):
    """The README's own 2025 example dates against a job that ran today."""
    logs, archive, _ = everyday_job
    where = ["--archive", str(archive)] if kind == "archive" else ["--log_dir", str(logs)]
    proc = run("query", *where, "--start_time", "2025-10-01 08:00:00", "--end_time", "2025-10-01 12:00:00",
               "--level", "ERROR")
    line = one_line(proc)
    assert proc.returncode == 1 and proc.stdout == ""
    assert "from 2025-10-01T08:00:00.000000Z until 2025-10-01T12:00:00.000000Z" in line and "level ERROR" in line
    from datetime import datetime, timezone

    assert datetime.now(timezone.utc).strftime("%Y-%m-%d") in line.split(";", 1)[1]  # where the data is


@pytest.mark.parametrize("command", [["stats", "--job", "no-such-job"], ["trace", "0" * 32]])
def test_other_read_commands_say_so_too(command, everyday_job):
    _, archive, _ = everyday_job
    proc = run(*command, "--archive", str(archive))
    assert proc.returncode == 1 and "no records matched" in one_line(proc)
