"""Times as people type them, in every time flag of every read command (ranklog.query.times):
compound durations, calendar words, signed offsets, ``--from/--to/--until`` listed in ``--help``,
``--tz`` for reading and showing times, and ``--job`` globs like ``--host``'s."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from ranklog.cli import build_parser
from ranklog.errors import UserError
from ranklog.query.times import parse_time, zone
from ranklog.units import parse_duration
from tests.helpers.everyday_job import JOB
from tests.helpers.procs import ranklog_cmd

# 2026-03-29 10:30:00 UTC: the morning Europe/Paris moved to summer time (01:00 UTC, +01:00 → +02:00).
NOW = int(datetime(2026, 3, 29, 10, 30, tzinfo=timezone.utc).timestamp()) * 10**9
S = 10**9


def run(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(ranklog_cmd(*args), capture_output=True, text=True, timeout=180,
                          env={**os.environ, **env})


@pytest.mark.parametrize(("text", "seconds"), [("1h30m", 5400), ("2d 12h", 216000), ("1m30.5s", 90.5),
                                               ("90", 90), ("250ms", 0.25)])
def test_compound_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["1h30", "h", "1h 30x", "2 days"])
def test_bad_durations_still_fail(text):
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(("text", "expected"), [
    ("1h30m", NOW - 5400 * S), ("-1h", NOW - 3600 * S), ("1h30m ago", NOW - 5400 * S),
    ("now-2h", NOW - 7200 * S), ("now - 2d 12h", NOW - 216000 * S), ("+10m", NOW + 600 * S),
    ("today", NOW - (10 * 3600 + 1800) * S), ("yesterday", NOW - (34 * 3600 + 1800) * S),
    ("tomorrow", NOW + (13 * 3600 + 1800) * S), ("yesterday 14:00", NOW - (20 * 3600 + 1800) * S),
    ("08:15", NOW - (2 * 3600 + 15 * 60) * S), ("2026-03-29 10:00", NOW - 1800 * S), ("now", NOW),
])
def test_words_and_offsets_in_utc(text, expected):
    assert parse_time(text, NOW) == expected


def test_calendar_words_and_naive_times_follow_the_zone():
    paris = ZoneInfo("Europe/Paris")
    # midnight in Paris that day was still winter time: 23:00 UTC the day before
    assert parse_time("today", NOW, tz=paris) == int(datetime(2026, 3, 28, 23, tzinfo=timezone.utc).timestamp()) * S
    assert parse_time("2026-03-29 12:30", NOW, tz=paris) == NOW  # 12:30 summer time = 10:30 UTC
    assert parse_time("2026-03-29T12:30:00Z", NOW, tz=paris) == NOW + 2 * 3600 * S  # a written zone wins
    with pytest.raises(UserError, match="bad --tz"):
        zone("Mars/Olympus")


@pytest.mark.parametrize("text", ["tomorrow-ish", "+1h ago", "yesterday 25:00", "1h30"])
def test_bad_times_are_one_clear_error(text):
    with pytest.raises(UserError, match=r"use e\.g\."):
        parse_time(text, NOW, "--since")


@pytest.mark.parametrize("name", ["query", "stats", "integrity", "trace", "triage", "report"])
def test_time_flags_are_listed_in_every_help(name):
    text = build_parser(name).format_help()
    for flag in ("--since", "--from", "--until", "--to", "--tz"):
        assert flag in text, f"ranklog {name} --help does not show {flag}"
    assert "1h30m" in text and "yesterday" in text


def test_the_cli_reads_durations_words_and_zones(everyday_job):
    _, archive, _ = everyday_job
    total = int(run("query", "--archive", str(archive), "--count").stdout)
    for since in ("1h30m", "-2h", "today", "2h ago"):
        proc = run("query", "--archive", str(archive), "--since", since, "--count")
        assert proc.returncode == 0 and int(proc.stdout) == total, (since, proc.stderr)
    assert run("query", "--archive", str(archive), "--until", "yesterday", "--count").returncode == 1
    triage = run("triage", "--archive", str(archive), "--from", "-1h", "--format", "json")
    assert triage.returncode in (0, 1) and json.loads(triage.stdout)["verdict"]["status"] == "failure"


def test_local_time_display_on_request(everyday_job):
    _, archive, _ = everyday_job
    utc = [json.loads(line) for line in run("query", "--archive", str(archive), "--format", "ndjson").stdout.splitlines()]
    tokyo = [json.loads(line) for line in run("query", "--archive", str(archive), "--format", "ndjson", "--tz", "local",
                                             TZ="Asia/Tokyo").stdout.splitlines()]
    assert [r["ts"].endswith("Z") for r in utc] == [True] * len(utc)
    assert all(r["ts"].endswith("+09:00") for r in tokyo)
    assert [datetime.fromisoformat(r["ts"]) for r in tokyo] == [datetime.fromisoformat(r["ts"]) for r in utc]
    raw = run("query", "--archive", str(archive), "--format", "raw", "-n", "1", RANKLOG_TZ="Asia/Kolkata").stdout
    assert raw.split()[0].endswith("+05:30")
    trace = json.loads(run("trace", everyday_job[2], "--archive", str(archive), "--format", "json", "--tz",
                           "Asia/Tokyo").stdout)
    assert trace["timeline"] and all(row["ts"].endswith("+09:00") for row in trace["timeline"])


def test_job_takes_globs_like_host(everyday_job):
    _, archive, _ = everyday_job
    exact = run("query", "--archive", str(archive), "--job", JOB, "--count")
    glob = run("query", "--archive", str(archive), "--job", JOB.split("-")[0] + "-*", "--count")
    assert exact.returncode == glob.returncode == 0 and int(exact.stdout) == int(glob.stdout) > 0
    assert run("query", "--archive", str(archive), "--job", "sft-*", "--count").returncode == 1
