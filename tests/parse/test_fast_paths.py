"""The shortcuts taken for speed give the same answers as the full passes they skip."""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ranklog.parse.ansi import strip_ansi
from ranklog.parse.arrowbytes import values_contain
from ranklog.parse.formats.ray import RAY
from ranklog.parse.timestamps import strings_to_timestamps
from ranklog.record import ts_ns


def _as_ns(column: pa.Array) -> list[int | None]:
    return [None if not valid else ns for ns, valid in zip(ts_ns(column).tolist(), column.is_valid().to_pylist(), strict=True)]


def _ns(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp()) * 10**9


def test_values_contain_sees_only_the_slice() -> None:
    column = pa.array(["plain", None, "col\x1b[31mour", "tail"])
    assert values_contain(column, b"\x1b")
    assert values_contain(column.slice(2, 1), b"\x1b")
    assert not values_contain(column.slice(0, 2), b"\x1b")
    assert not values_contain(column.slice(3), b"\x1b")
    assert not values_contain(pa.nulls(4, pa.string()), b"\x1b")
    assert not values_contain(pa.array([], pa.string()), b"\x1b")
    assert values_contain(pa.array(["a,b"], pa.large_string()), b",")
    assert values_contain(pa.chunked_array([["x"], ["y,z"]]), b",")


def test_strip_ansi_on_a_slice_next_to_coloured_values() -> None:
    column = pa.array(["\x1b[1mbold\x1b[0m", "clean", "\x1b[32mgreen\x1b[0m"])
    assert strip_ansi(column.slice(1, 1)).to_pylist() == ["clean"]
    assert strip_ansi(column).to_pylist() == ["bold", "clean", "green"]


@pytest.mark.parametrize("values", [
    ["2026-12-02 13:04:05,250", "2026-12-02T13:04:06Z"],  # naive first, then zoned
    ["2026-12-02T13:04:06Z", "2026-12-02 13:04:05,250"],  # zoned first, then naive
])
def test_mixed_zoned_and_naive_columns_parse_every_value(values: list[str]) -> None:
    got = _as_ns(strings_to_timestamps(pa.array(values), "UTC"))
    expected = {"2026-12-02 13:04:05,250": _ns("2026-12-02T13:04:05+00:00") + 250_000_000,
                "2026-12-02T13:04:06Z": _ns("2026-12-02T13:04:06+00:00")}
    assert got == [expected[v] for v in values]


TIME_SPELLINGS = ["2026-12-02T13:04:05Z", "2026-12-02T13:04:05.123456789Z", "2026-12-02T13:04:05,250+02:00",
                  "2026-12-02 13:04:05", "2026-12-02 13:04:05.5", "2026-12-02T13:04:05-0330", "  2026-12-02 13:04:05 ",
                  "2999-01-01T00:00:00Z", "2999-01-01 00:00:00", "1600-01-01T00:00:00Z", "2262-04-11T23:47:16Z",
                  "2261-12-31T00:00:00Z", "1678-01-01T00:00:00Z", "yesterday", "", "2026-13-45T99:00:00Z",
                  "20261202T130405Z", "2026-12-02T13:04:05 Z", None]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(TIME_SPELLINGS), min_size=1, max_size=30), st.sampled_from(["UTC", "Europe/Berlin"]))
def test_a_column_of_times_is_each_time_read_alone(values: list[str | None], tz: str) -> None:
    """Whatever else a column holds (times with and without a zone, a year the nanosecond cast cannot
    hold, text that is no time), each value reads as it does alone."""
    alone = [_as_ns(strings_to_timestamps(pa.array([value], pa.string()), tz))[0] for value in values]
    assert _as_ns(strings_to_timestamps(pa.array(values, pa.string()), tz)) == alone


def test_one_odd_time_alone_takes_python(monkeypatch) -> None:
    """A year past the nanosecond range and a naive time among a thousand zoned ones: the others are
    still cast in bulk (Python read every value of such a column: ~4 µs a line for the block)."""
    from ranklog.parse import timestamps

    seen: list[str] = []
    real = timestamps._parse_one
    monkeypatch.setattr(timestamps, "_parse_one", lambda value, zone: seen.append(value) or real(value, zone))
    values = [f"2026-12-02T13:04:{i % 60:02d}.{i:06d}Z" for i in range(1000)]
    values[500], values[700] = "2999-01-01T00:00:00Z", "2026-12-02 13:04:05"
    got = _as_ns(strings_to_timestamps(pa.array(values), "UTC"))
    assert seen == ["2999-01-01T00:00:00Z"]
    assert got[500] is None and got[700] == _ns("2026-12-02T13:04:05+00:00") and got[1] == _ns("2026-12-02T13:04:01+00:00") + 1000


def test_naive_times_take_the_configured_zone_and_utc_needs_no_conversion() -> None:
    column = pa.array([None, "2026-07-01 12:00:00.5"])
    utc = _as_ns(strings_to_timestamps(column, "UTC"))
    berlin = _as_ns(strings_to_timestamps(column, "Europe/Berlin"))
    assert utc == [None, _ns("2026-07-01T12:00:00+00:00") + 500_000_000]
    assert berlin == [None, utc[1] - 2 * 3600 * 10**9]  # CEST is UTC+2


def test_zoned_times_keep_their_offsets() -> None:
    column = pa.array(["2026-12-02T13:04:05.000001+01:00", "2026-12-02T12:04:05.000002Z"])
    got = _as_ns(strings_to_timestamps(column, "Asia/Tokyo"))
    base = _ns("2026-12-02T12:04:05+00:00")
    assert got == [base + 1000, base + 2000]


def test_values_as_one_spans_exactly_the_slice() -> None:
    from ranklog.parse.arrowbytes import values_as_one

    column = pa.array(["alpha", None, "beta", "gamma"])
    assert values_as_one(column).to_pylist() == ["alphabetagamma"]
    assert values_as_one(column.slice(2, 1)).to_pylist() == ["beta"]
    assert values_as_one(pa.chunked_array([["a"], ["b"]])).to_pylist() == ["ab"]
    assert values_as_one(pa.array([], pa.string())).to_pylist() == [""]
    assert values_as_one(pa.array(["x"], pa.large_string())).to_pylist() == ["x"]


def test_leading_step_shortcut_gives_text_steps_numbers() -> None:
    """Messages starting with their step take the anchored LEADING_STEP; every message still gets the
    number the unanchored TEXT_STEP finds (or none), whichever path took it."""
    import pyarrow.compute as pc

    from ranklog.parse.steps import TEXT_STEP, _step_numbers

    texts = pa.array([
        "step 12 finished", "Step 12/500", "global_step=40 loss=1", "GLOBAL STEP 41", "[step 7] ok", "step: 5",
        "stepwise 5 then step 6", "steps 3 and step 4", "ſtep 3", "STEP#9", "step [10]", "step 1234567890123 big",
        "step 123456789012", "step 12a then step 13", "epoch 1 step 50", "/step 5", "x_step 7 step 8", "step\t8",
        "step  =  9", "step-13", "no number", None, "step 007", "global_step 1 step 2",
    ])
    expected = pc.struct_field(pc.extract_regex(texts, TEXT_STEP), [0])
    got = _step_numbers(texts)
    assert got.to_pylist() == expected.to_pylist()
    assert got.to_pylist()[:4] == ["12", "12", "40", "41"]


@pytest.mark.parametrize("pattern", [
    *(pattern for layout in RAY.layouts for pattern in layout.patterns),
    r"^(?P<_prefix>\[rank(?P<rank>\d+)\]: ?)(?P<_rest>.*)$",
    r"^a|(?P<x>b)?(?P<msg>.*)$",  # the tail in one branch only; a group that takes no part
    r"(?P<word>\w+) (?P<msg>.*)$",  # unanchored
])
def test_extract_groups_answers_like_extract_regex(pattern: str, monkeypatch) -> None:
    """The message tail cut out of the line by offset, instead of matched, gives extract_regex's
    struct: same matched rows, same groups ("" for a group that took no part). (On a few lines,
    which extract_regex would take below MIN_ROWS.)"""
    import pyarrow.compute as pc

    from ranklog.parse import groups
    from ranklog.parse.groups import extract_groups

    monkeypatch.setattr(groups, "MIN_ROWS", 0)
    lines = pa.array([
        "2026-12-02 13:04:05,123 - verl.trainer - INFO - step 1 - loss 0.5",
        "2026-12-02 13:04:05,123 - my logger - ERROR - spaces in the name",
        "[2026-12-02 13:04:05,123][hydra][WARNING] - ünïcode — here",
        "2026-12-02 13:04:05.123 | SUCCESS  | mod:fn:12 - done",
        "2026-12-02 13:04:05,123\tINFO file.py:3 -- ray",
        "2026-12-02T13:04:05Z ERROR torch.x: boom", "2026-12-02 13:04:05 [INFO] ad hoc", "WARNING:root:basic",
        "I1202 13:04:05.123456 1234 file.cc:42] glog", "[2025-10-01 08:00:00,123 I 1 2] (raylet) a.cc:4: cpp",
        "[rank3]: 2026-12-02 13:04:05,123 - x - INFO - ranked", "b", "a", "", None, "plain text é", "x y",
        "2026-12-02 13:04:05,123 - x - INFO - ",
    ])
    for texts in (lines, lines.slice(3, 9), lines.filter(pc.is_valid(lines))):
        expected, got = pc.extract_regex(texts, pattern), extract_groups(texts, pattern)
        assert got.is_valid().equals(expected.is_valid())
        assert got.filter(got.is_valid()).equals(expected.filter(expected.is_valid()))
    assert extract_groups(pa.array(["a\nb"]), r"(?P<msg>.*)$").to_pylist() == [{"msg": "b"}]  # not a line: RE2 as is


def test_byte_helpers_see_only_the_slice_and_keep_nulls() -> None:
    import pyarrow.compute as pc

    from ranklog.parse.arrowbytes import first_bytes, replace_byte, value_lengths

    column = pa.array(["a,b", None, "", "é,", ",,x", "plain"]).slice(1, 4)
    assert value_lengths(column).tolist() == [0, 0, 3, 3]
    assert first_bytes(column).tolist() == [0, 0, 0xC3, ord(",")]
    assert replace_byte(column, b",", b".").equals(pc.replace_substring(column, ",", "."))
    assert replace_byte(column, b",", b".").to_pylist() == [None, "", "é.", "..x"]
    assert first_bytes(pa.array(["", ""])).tolist() == [0, 0]
    with pytest.raises(ValueError):
        replace_byte(column, b",", "é".encode())


def test_lines_a_custom_layout_takes_are_still_blank_when_blank() -> None:
    """Header lines starting with a visible ASCII character skip the blank/indent/traceback kernels;
    a layout that also takes whitespace-only lines (ASCII or not) still sees them as blank."""
    from ranklog.parse import SourceContext, parse

    ctx = SourceContext(source="/x.log", source_id="s", format="text", host="h", ip="127.0.0.1",
                        options={"regex": r"^(?P<msg>.*)$"})
    data = "first\n   \n\u3000\u2003\n\tindented\nlast\n".encode()
    rows = parse(data, 0, ctx, final=True, read_time_ns=0).batch.to_pylist()
    assert [row["msg"] for row in rows] == ["first", "\tindented", "last"]


_ATTRS = st.one_of(st.none(), st.sampled_from(["{}", " {} ", '{"a":1}', "not json", '{"b":"x"}']))
_REASONS = st.one_of(st.none(), st.sampled_from(["previous", "next", "Etc/UTC"]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_ATTRS, _REASONS), max_size=12), st.booleans())
def test_mark_adds_the_reason_to_each_rows_attrs(rows: list[tuple[str | None, str | None]], no_attrs: bool) -> None:
    """inferred_time.mark (one object per distinct reason, joined only where a row has attrs) against
    the row-by-row meaning: the reason's member first, then the row's own object's members."""
    import json

    from ranklog.parse.inferred_time import mark

    attrs = None if no_attrs else pa.array([a for a, _ in rows], pa.string())
    reasons = pa.array([r for _, r in rows], pa.string())
    expected = []
    for own, reason in rows:
        own = None if no_attrs else own
        if reason is None:
            expected.append(own)
        elif own is None or own.strip() == "{}" or not own.startswith("{"):
            expected.append(json.dumps({"tz": reason}, separators=(",", ":")))
        else:
            expected.append('{"tz":"' + reason + '",' + own[1:])
    assert mark(attrs, reasons, "tz").to_pylist() == expected


def test_launcher_prefix_prefilter_sees_every_prefix_start() -> None:
    """The byte test before the launcher-prefix regex: every prefix's line passes, a plain log line not."""
    from ranklog.parse.arrowbytes import bytes_at, first_bytes
    from ranklog.parse.inference.prefixes import may_start_with_one

    def passes(line: str) -> bool:
        column = pa.array(["x", line]).slice(1)
        return may_start_with_one(first_bytes(column), bytes_at(column, 10))

    for line in ("2026-12-07T11:06:10.123456789Z stdout F msg", "[1,3]<stdout>: msg", "(WorkerDict pid=1) msg",
                 "[rank3]: msg", "[default0]:msg"):
        assert passes(line), line
    assert not passes("2026-12-07 11:06:10,123 - a - INFO - msg") and not passes("step 3 done")


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(_ATTRS, st.one_of(st.none(), st.booleans())), max_size=12), st.booleans())
def test_mark_where_is_mark_with_one_reason(rows: list[tuple[str | None, bool | None]], no_attrs: bool) -> None:
    from ranklog.parse.inferred_time import mark, mark_where

    attrs = None if no_attrs else pa.array([a for a, _ in rows], pa.string())
    where = pa.array([w for _, w in rows], pa.bool_())
    reasons = pa.array(["UTC" if w else None for _, w in rows], pa.string())
    assert mark_where(attrs, where, "tz", "UTC").to_pylist() == mark(attrs, reasons, "tz").to_pylist()
