"""One output model for every read command (``ranklog.commands._output``): ``--format table|raw|json|csv``
on query, trace, stats, integrity and triage; a table on a terminal, and when piped what a program
reads without options — NDJSON records (query, trace) or plain uncut text (stats, integrity, triage);
``-o FILE`` by extension; the old ``--json`` still works. Data: a real four-rank job (everyday_job)."""

from __future__ import annotations

import csv
import io
import json
import subprocess

import pytest

from tests.helpers.everyday_job import LONG, RANKS
from tests.helpers.procs import ranklog_cmd

BOX = set("│┃━─╭╮╰╯┏┓┗┛═║")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(ranklog_cmd(*args), capture_output=True, text=True, timeout=180)


def command_args(name: str, job) -> list[str]:
    _, archive, trace_id = job
    return [name, *([trace_id] if name == "trace" else []), "--archive", str(archive)]


@pytest.mark.parametrize("fmt", ["table", "raw", "json", "csv"])
@pytest.mark.parametrize("name", ["query", "trace", "stats", "integrity", "triage"])
def test_every_command_takes_every_format(name, fmt, everyday_job):
    proc = run(*command_args(name, everyday_job), "--format", fmt)
    # triage exits 1 when it finds a failure (this job has one), the others 0 (docs/cli.md)
    assert proc.returncode in ((0, 1) if name == "triage" else (0,)), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout.strip()
    if fmt == "json":
        json.loads(proc.stdout)
    elif fmt == "csv":
        rows = list(csv.reader(io.StringIO(proc.stdout)))
        # a clean integrity check lists no problem: its CSV is the header alone
        assert len(rows) >= (1 if name == "integrity" else 2) and len(rows[0]) > 1 and all(rows[0]), rows[:2]
    elif fmt == "raw":
        assert not BOX & set(proc.stdout), proc.stdout[:400]


@pytest.mark.parametrize("name", ["query", "trace"])
def test_records_piped_are_ndjson_and_never_cut(name, everyday_job):
    """`ranklog trace ID | less` printed an 80-column table with messages cut; piped, records are NDJSON."""
    proc = run(*command_args(name, everyday_job))
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert any(row["msg"] == LONG for row in rows)


@pytest.mark.parametrize("name", ["stats", "integrity", "triage"])
def test_summaries_piped_are_plain_uncut_text(name, everyday_job):
    proc = run(*command_args(name, everyday_job))
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr
    assert not BOX & set(proc.stdout) and proc.stdout.strip()
    assert all(not line.startswith(" ") or line.strip() for line in proc.stdout.splitlines())


def test_raw_records_are_one_line_each_with_tracebacks_indented(everyday_job):
    _, archive, _ = everyday_job
    count = int(run("query", "--archive", str(archive), "--count").stdout)
    proc = run("query", "--archive", str(archive), "--format", "raw")
    lines = proc.stdout.splitlines()
    firsts = [line for line in lines if not line.startswith(" ")]
    assert len(firsts) == count
    assert any(line.startswith("  ") and "RuntimeError: NCCL error" in line for line in lines)
    crash = next(line for line in firsts if "uncaught exception" in line)
    assert " CRITICAL " in crash and " r2 " in crash
    assert any(line.endswith(LONG) for line in firsts)  # nothing cut


@pytest.mark.parametrize(("name", "file", "check"), [
    ("stats", "stats.csv", lambda text: text.startswith("distribution,key,records")),
    ("trace", "trace.json", lambda text: json.loads(text)["records"] > RANKS),
    ("triage", "verdict.txt", lambda text: "NCCL" in text and not BOX & set(text)),
    ("query", "records.txt", lambda text: LONG in text),
])
def test_output_file_format_from_its_extension(name, file, check, everyday_job, tmp_path):
    target = tmp_path / file
    proc = run(*command_args(name, everyday_job), "-o", str(target))
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, proc.stderr
    assert check(target.read_text())


@pytest.mark.parametrize("name", ["trace", "stats", "integrity", "triage"])
def test_the_old_json_flag_still_works(name, everyday_job):
    proc = run(*command_args(name, everyday_job), "--json")
    assert isinstance(json.loads(proc.stdout), dict)
