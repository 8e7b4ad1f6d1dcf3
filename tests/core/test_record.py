"""The record schema and its normalisation, shared by every component."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pyarrow as pa
import pytest

from ranklog import record


@pytest.mark.parametrize(("raw", "expected"), [
    ("warn", "WARNING"), ("W", "WARNING"), ("fatal", "CRITICAL"), ("Err", "ERROR"), (" info ", "INFO"),
    ("trace", "DEBUG"), (40, "ERROR"), (25, "INFO"), (None, "UNKNOWN"), ("bogus", "UNKNOWN"),
])
def test_normalize_level(raw, expected):
    assert record.normalize_level(raw) == expected


def test_levels_at_least_excludes_unknown():
    assert record.levels_at_least("warning") == ["WARNING", "ERROR", "CRITICAL"]


@pytest.mark.parametrize(("value", "expected_ns"), [
    ("2026-12-02T13:04:05.123456Z", 1796216645123456000),
    ("2026-12-02 13:04:05", 1796216645000000000),
    ("2026-12-02T14:04:05.5+01:00", 1796216645500000000),
    (1796216645, 1796216645000000000),
    (1796216645123, 1796216645123000000),
    (1796216645123456, 1796216645123456000),
    (datetime(2026, 12, 2, 13, 4, 5, 123456, tzinfo=timezone.utc), 1796216645123456000),
    ("not a time", None), (True, None), ("", None),
])
def test_parse_ts(value, expected_ns):
    assert record.parse_ts(value) == expected_ns


def test_format_ts_round_trips_microseconds():
    text = record.format_ts(1796216645123456789)
    assert text == "2026-12-02T13:04:05.123456Z"
    assert record.parse_ts(text) == 1796216645123456000


def test_arrow_schema_types_and_nullability():
    schema = record.arrow_schema()
    assert schema.names == list(record.FIELDS)
    # microseconds: Spark >= 3.2 and Trino refuse Parquet TIMESTAMP(NANOS) (SPARK-40819)
    assert schema.field("ts").type == pa.timestamp("us", tz="UTC") == record.TS_TYPE
    assert schema.field("rank").type == pa.int32() and schema.field("offset").type == pa.int64()
    assert not schema.field("source_id").nullable and schema.field("exc").nullable


NS = 1796216645123456789  # 2026-12-02T13:04:05.123456789Z


@pytest.mark.parametrize(("values", "unit"), [
    ([NS, None], "ns"),
    ([NS // 1000, None], "us"),
    (pa.array([NS, None], pa.int64()), "ns"),
    (pa.array([NS, None], pa.timestamp("ns", tz="UTC")), "ns"),
    (pa.array([NS // 1000, None], pa.timestamp("us")), "us"),
    (pa.chunked_array([pa.array([NS, None], pa.timestamp("ns"))]), "ns"),
])
def test_ts_array_takes_ns_and_us_input(values, unit):
    out = record.ts_array(values, unit)
    assert out.type == record.TS_TYPE
    assert out.cast(pa.int64()).to_pylist() == [NS // 1000, None]
    assert record.ts_ns(out).tolist() == [NS // 1000 * 1000, 0]


@pytest.mark.parametrize("bad", [2**63, -(2**63), 10**30, 253402300800 * 10**9, True, "2026", 1.5])
def test_ts_array_nulls_what_it_cannot_store_and_never_raises(bad):
    """Years past 2262 (or before 1677) have no nanosecond integer: null, so inference fills them."""
    assert record.ts_array([bad, NS]).to_pylist()[0] is None
    assert record.ts_array(pa.array([2**62, 5], pa.int64()), "us").null_count == 1
    assert record.ts_array(pa.array([10**17], pa.timestamp("s"))).null_count == 1


def test_ns_to_ts_rounds_bounds_exactly():
    assert record.ns_to_ts(NS) == NS // 1000 and record.ns_to_ts(NS, ceil=True) == NS // 1000 + 1
    assert record.ns_to_ts(NS - 789, ceil=True) == NS // 1000


def test_normalize_row_keeps_everything():
    row = record.normalize_row(
        {"ts": "2026-12-02T13:04:05Z", "level": "warn", "msg": "hi", "rank": "3", "pid": "x",
         "host": 7, "lr": 0.1, "attrs": {"a": 1}},
        defaults={"host": "n1", "source": "f", "source_id": "id", "offset": 0, "format": "json", "ip": ""},
    )
    assert row["level"] == "WARNING" and row["rank"] == 3 and row["pid"] is None
    attrs = json.loads(row["attrs"])
    # Wrong-typed known fields and unknown keys are kept in attrs, never dropped.
    assert attrs == {"a": 1, "lr": 0.1, "pid": "x", "host": 7}
    assert row["host"] is None or row["host"] == "n1"


def test_a_job_id_written_as_a_number_is_the_job():
    """A scheduler's job id is a number (SLURM_JOB_ID): kept as its digits, not as a wrong-typed value
    in attrs (which counted a parse error on every line and left the record without its job)."""
    row = record.normalize_row({"msg": "m", "job": 4242, "host": 7})
    assert row["job"] == "4242" and json.loads(row["attrs"]) == {"host": 7}
    for odd in (True, 4.5, [1]):
        row = record.normalize_row({"msg": "m", "job": odd})
        assert row["job"] is None and json.loads(row["attrs"]) == {"job": odd}


def test_out_of_range_ints_go_to_attrs():
    row = record.normalize_row({"msg": "m", "rank": 2**40, "step": 10**30})
    assert row["rank"] is None and row["step"] is None
    assert json.loads(row["attrs"]) == {"rank": 2**40, "step": 10**30}


def test_rows_to_table_conforms_to_schema():
    table = record.rows_to_table(
        [{"ts": 1796216645, "msg": "a", "level": "E", "extra_key": [1, 2]}],
        defaults={"host": "n1", "ip": "127.0.0.1", "source": "s", "source_id": "i", "offset": 5, "format": "json"},
    )
    assert table.schema == record.arrow_schema()
    rec = table.to_pylist()[0]
    assert rec["level"] == "ERROR" and rec["offset"] == 5 and json.loads(rec["attrs"]) == {"extra_key": [1, 2]}
