"""Parsing of flag values into a QuerySpec: times, levels, ranks, lists, errors."""

from __future__ import annotations

import argparse

import pytest

from ranklog.errors import UserError
from ranklog.query.filter_flags import (
    add_filter_flags,
    parse_int_ranges,
    parse_levels,
    parse_order,
    parse_time,
    spec_from_args,
)
from ranklog.query.filters import QuerySpec

NOW = 1_759_320_000 * 10**9  # 2025-10-01T12:00:00Z


def test_times_without_zone_are_utc_and_zones_are_honoured():
    assert parse_time("2025-10-01 08:00:00", NOW) == 1_759_305_600 * 10**9
    assert parse_time("2025-10-01T08:00:00Z", NOW) == 1_759_305_600 * 10**9
    assert parse_time("2025-10-01T10:00:00+02:00", NOW) == 1_759_305_600 * 10**9
    assert parse_time("2025-10-01", NOW) == 1_759_276_800 * 10**9
    assert parse_time("2025-10-01 08:00:00.250", NOW) == 1_759_305_600 * 10**9 + 250_000_000
    assert parse_time("1759305600", NOW) == 1_759_305_600 * 10**9


@pytest.mark.parametrize("text, seconds", [("2h", 7200), ("30m ago", 1800), ("now-90s", 90), ("7d", 7 * 86400),
                                           ("now", 0)])
def test_relative_times(text, seconds):
    assert parse_time(text, NOW) == NOW - seconds * 10**9


@pytest.mark.parametrize("text", ["yesterday-ish", "2025-13-01", "", "2 parsecs"])
def test_bad_times_name_the_flag(text):
    with pytest.raises(UserError, match="--start"):
        parse_time(text, NOW, "--start")


def test_rank_lists_and_ranges():
    assert parse_int_ranges("0-3,7") == (0, 1, 2, 3, 7)
    assert parse_int_ranges(["12", "3-4", "4"]) == (3, 4, 12)
    for bad in ("7-3", "a", "1-", "-1"):
        with pytest.raises(UserError, match="--rank"):
            parse_int_ranges(bad)


def test_level_minimum_and_exact():
    assert parse_levels("error", None) == ("ERROR", "CRITICAL")
    assert parse_levels("warn", None) == ("WARNING", "ERROR", "CRITICAL")
    assert parse_levels(None, ["ERROR,fatal", "UNKNOWN"]) == ("ERROR", "CRITICAL", "UNKNOWN")
    with pytest.raises(UserError, match="unknown level"):
        parse_levels("LOUD", None)
    with pytest.raises(UserError, match="either"):
        parse_levels("ERROR", ["INFO"])


def test_order_spellings():
    assert parse_order(None) == ("ts",)
    assert parse_order("none") == ()
    assert parse_order("-ts") == ("-ts",)
    assert parse_order("ts:desc") == ("-ts",)
    assert parse_order("host:asc,ts") == ("host", "ts")
    assert parse_order("host,ts") == ("host", "ts")
    with pytest.raises(UserError, match="cannot sort by"):
        QuerySpec(order=("attrs",))


def test_spec_checks():
    with pytest.raises(UserError, match="end must be after start"):
        QuerySpec(start_ns=10, end_ns=5)
    with pytest.raises(UserError, match="bad --regex"):
        QuerySpec(regex="(unclosed")
    with pytest.raises(UserError, match="step"):
        QuerySpec(step_min=10, step_max=2)


def test_roundtrip_through_json_dict():
    spec = QuerySpec(start_ns=1, end_ns=2, levels=("ERROR",), ranks=(1, 2), attrs=("a=b",), order=("-ts",), limit=3)
    assert QuerySpec.from_dict(spec.to_dict()) == spec
    with pytest.raises(UserError, match="unknown query key"):
        QuerySpec.from_dict({"lvl": "x"})


def test_all_flag_spellings_reach_the_spec():
    parser = argparse.ArgumentParser()
    add_filter_flags(parser)
    parser.add_argument("--limit")
    parser.add_argument("--sort")
    args = parser.parse_args([
        "--start_time", "2025-10-01 08:00:00", "--end-time", "2025-10-01 12:00:00", "--level", "ERROR",
        "--host", "a,b", "--host", "c*", "--ip", "10.0.0.1", "--pid", "12,13", "--rank", "0-2", "--job", "j",
        "--trace_id", "t1", "--logger", "x.y", "--step_min", "5", "--step-max", "9", "--contains", "boom",
        "--regex", "a+b", "-i", "--attr", "k=v", "--limit", "4", "--sort=-ts"])
    spec = spec_from_args(args, NOW)
    assert spec == QuerySpec(
        start_ns=1_759_305_600 * 10**9, end_ns=1_759_320_000 * 10**9, levels=("ERROR", "CRITICAL"),
        hosts=("a", "b", "c*"), ips=("10.0.0.1",), pids=(12, 13), ranks=(0, 1, 2), jobs=("j",), trace_ids=("t1",),
        loggers=("x.y",), step_min=5, step_max=9, contains="boom", regex="a+b", ignore_case=True,
        attrs=("k=v",), limit=4, order=("-ts",))
    since = spec_from_args(parser.parse_args(["--since", "2h"]), NOW)
    assert since.start_ns == NOW - 7200 * 10**9 and since.end_ns is None
    with pytest.raises(UserError, match="either --since or --start"):
        spec_from_args(parser.parse_args(["--since", "2h", "--start", "2025-10-01"]), NOW)
