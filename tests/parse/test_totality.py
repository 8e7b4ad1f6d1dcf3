"""Every parser and the archive's ingest decoder are total: hypothesis feeds lines whose known fields take
extreme and wrong values (timestamps from year 0 to beyond 9999, epoch numbers in s/ms/µs/ns, negatives,
NaN, huge ints, nested objects) and asserts no exception, one record per line, nothing dropped, and a
stored `ts` every reader can convert. Fixed example budget and derandomized: part of `make test`."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ranklog.archive.ingest import ARROW_STREAM, CONTENT_TYPES, NDJSON, decode
from ranklog.archive.ingest_values import PARSE_ERROR, pop_repaired
from ranklog.parse import FORMATS
from ranklog.record import arrow_schema
from tests.parse.conftest import make_ctx, parse_whole

EXAMPLES = 40
_SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
RECEIVED_NS = 1_796_220_000_000_000_000

# --- values ---------------------------------------------------------------------------------------

_year = st.integers(0, 12000)
_iso = st.builds(lambda y, mo, d, h, mi, s, frac, zone: f"{y:04d}-{mo:02d}-{d:02d}{'T' if h % 2 else ' '}{h:02d}:{mi:02d}:{s:02d}{frac}{zone}",
                 _year, st.integers(0, 13), st.integers(0, 32), st.integers(0, 25), st.integers(0, 61), st.integers(0, 61),
                 st.sampled_from(["", ".5", ",123", ".123456", ".123456789", ".1234567891234"]),
                 st.sampled_from(["", "Z", "+02:00", "-0530", "+99:99"]))
_epoch = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 1_796_220_000, 1_796_220_000_000, 1_796_220_000_000_000, 1_796_220_000_000_000_000,
                     253_402_300_800, 253_402_300_800_000_000, -62_135_596_800, 2**63 - 1, -(2**63), 2**64, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
)
_scalar = st.one_of(_iso, _epoch, st.booleans(), st.none(), st.text(max_size=12),
                    st.sampled_from(["NaN", "-inf", "", "yesterday", "9" * 40]))
_value = st.one_of(_scalar, st.lists(_scalar, max_size=3), st.dictionaries(st.text(max_size=4), _scalar, max_size=3))
_KNOWN = ("ts", "level", "msg", "exc", "logger", "host", "ip", "pid", "rank", "local_rank", "job", "role",
          "trace_id", "step", "seq")
_objects = st.dictionaries(st.sampled_from([*_KNOWN, "time", "timestamp", "@timestamp", "severity", "message",
                                            "data", "extra"]), _value, min_size=1, max_size=8)


def _json_line(obj: dict) -> str:
    return json.dumps(obj, allow_nan=True)


# --- text lines: each format's layouts with extreme digits where the regexes expect numbers -----------

_word = st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1, max_size=10)
_digits = st.one_of(st.integers(0, 10**25).map(str), st.sampled_from(["0", "99999999999", "2147483648", "-1"]))


def _text_line(draw) -> str:
    ts, msg, num, word = draw(_iso), draw(_word), draw(_digits), draw(_word)
    level = draw(st.sampled_from(["INFO", "ERROR", "WARNING", "DEBUG", "FATAL"]))
    templates = [
        f"{ts} - {word} - {level} - {msg}",
        f"[{ts}][{word}][{level}] - {msg}",
        f"{ts} | {level} | {word}:f:{num} - {msg}",
        f"{ts}\t{level} {word}.py:{num} -- {msg}",
        f"{ts} {level} {word}: {msg}",
        f"[default0]:[rank{num}]: {ts} {level} {msg}",  # torchrun --tee; a bare "[rank0]: " is its prefix
        f"I{num[:4].zfill(4)} {num[:2].zfill(2)}:61:99.{num} {num} {word}.cc:{num}] {msg}",
        f"[{ts}] [{num}] [{word}.cc:{num}] {level} {msg}",
        f"({word} pid={num}) {ts} {level} {msg}",
        f"({word} pid={num}, ip=1.2.3.4) {msg}",
        f"step:{num} - {word}/loss:{draw(_digits)} - {word}:{draw(st.floats(allow_nan=True).map(str))}",
        f"{{\"ts\": \"{ts}\", \"level\": \"{level}\", \"msg\": \"{msg}\", \"rank\": {num}}}",
        f"{level}:{word}:{msg}",
        f"{msg} {num}",
    ]
    return draw(st.sampled_from(templates))


_text_lines = st.lists(st.composite(lambda draw: _text_line(draw))(), min_size=1, max_size=12)
# a block where every line has a plain ts lets pyarrow's reader infer timestamp[s] (the issue's crash)
_uniform = st.lists(st.builds(lambda y, v: _json_line({"ts": f"{y:04d}-06-01T00:00:00Z", "msg": "m", "rank": v}),
                              st.integers(1, 9999), _epoch), min_size=9, max_size=12)
_json_lines = st.one_of(st.lists(_objects.map(_json_line), min_size=1, max_size=12), _uniform)


def _check_batch(table: pa.Table, lines: list[str]) -> None:
    assert table.num_rows == len(lines), "one record per line"
    starts, pos = [], 0
    for line in lines:
        starts.append(pos)
        pos += len(line.encode()) + 1
    assert table.column("offset").to_pylist() == starts
    ns = table.column("ts").cast(pa.int64()).to_pylist()
    assert all(v is not None for v in ns)
    for attrs in table.column("attrs").to_pylist():
        if attrs is not None:
            json.loads(attrs)  # attrs is JSON text every reader can parse


LINE_FORMATS = [f for f in FORMATS if f != "torchrun-error"]
JSON_FORMATS = ("json", "ranklog", "verl-jsonl")


@pytest.mark.parametrize("fmt", LINE_FORMATS)
@_SETTINGS
@given(data=st.data())
def test_every_parser_is_total(fmt, data):
    lines = data.draw(_json_lines if fmt in JSON_FORMATS else _text_lines)
    table, _ = parse_whole(("\n".join(lines) + "\n").encode(), make_ctx(fmt))
    _check_batch(table, lines)


@_SETTINGS
@given(lines=_json_lines)
def test_torchrun_error_file_is_total(lines):
    table, _ = parse_whole(("\n".join(lines) + "\n").encode(), make_ctx("torchrun-error"))
    assert table.num_rows >= 1


# --- archive ingest ---------------------------------------------------------------------------------

def _decoded(body: bytes, content_type: str) -> tuple[pa.Table, int]:
    return pop_repaired(decode(body, CONTENT_TYPES[content_type], 0, RECEIVED_NS, 1 << 30))


@_SETTINGS
@given(objs=st.lists(_objects, min_size=1, max_size=12))
def test_ndjson_ingest_is_total(objs):
    body = "\n".join(_json_line(o) for o in objs).encode()
    table, repaired = _decoded(body, NDJSON)
    assert table.num_rows == len(objs) and table.schema == arrow_schema()
    assert all(v is not None for v in table.column("ts").cast(pa.int64()).to_pylist())
    noted = sum(PARSE_ERROR in (a or "") for a in table.column("attrs").to_pylist())
    assert noted >= repaired


_ts_units = st.sampled_from(["s", "ms", "us", "ns"])


@st.composite
def _arrow_tables(draw) -> pa.Table:
    n = draw(st.integers(1, 8))
    unit = draw(_ts_units)
    ints = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1))
    ts_kind = draw(st.sampled_from(["timestamp", "int64", "float64", "string"]))
    if ts_kind == "timestamp":
        ts = pa.array(draw(st.lists(ints, min_size=n, max_size=n)), pa.timestamp(unit, tz=draw(st.sampled_from([None, "UTC"]))))
    elif ts_kind == "int64":
        ts = pa.array(draw(st.lists(ints, min_size=n, max_size=n)), pa.int64())
    elif ts_kind == "float64":
        ts = pa.array(draw(st.lists(st.floats(allow_nan=True), min_size=n, max_size=n)), pa.float64())
    else:
        ts = pa.array(draw(st.lists(st.one_of(_iso, st.text(max_size=5)), min_size=n, max_size=n)), pa.string())
    def strings():
        return pa.array(draw(st.lists(st.one_of(st.none(), st.text(max_size=6)), min_size=n, max_size=n)), pa.string())
    columns = {
        "ts": ts, "level": strings(), "msg": strings(), "host": strings(), "ip": strings(), "source": strings(),
        "source_id": pa.array(draw(st.lists(st.sampled_from(["a", "b"]), min_size=n, max_size=n))),
        "offset": pa.array(draw(st.lists(st.integers(0, 2**62), min_size=n, max_size=n, unique=True)), pa.int64()),
        "format": strings(),
        "pid": pa.array(draw(st.lists(ints, min_size=n, max_size=n)), pa.int64()),
        "rank": pa.array(draw(st.lists(st.one_of(st.none(), st.text(max_size=4)), min_size=n, max_size=n)), pa.string()),
        "step": pa.array(draw(st.lists(st.floats(allow_nan=True), min_size=n, max_size=n)), pa.float64()),
    }
    return pa.table(columns)


@_SETTINGS
@given(table=_arrow_tables())
def test_arrow_ingest_is_total(table):
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    out, _ = _decoded(sink.getvalue().to_pybytes(), ARROW_STREAM)
    assert out.num_rows == table.num_rows and out.schema == arrow_schema()
    assert out.column("offset").to_pylist() == table.column("offset").to_pylist()
    assert all(v is not None for v in out.column("ts").cast(pa.int64()).to_pylist())


def test_the_issue_line_keeps_the_batch_and_its_raw_time():
    """Issue #20: one `ts` in year 2999 among good lines — the parser keeps all, the value in attrs."""
    good = [_json_line({"ts": f"2026-12-01T00:{i // 60:02d}:{i % 60:02d}Z", "msg": f"ok {i}"}) for i in range(99)]
    lines = [*good[:50], _json_line({"ts": "2999-06-01T00:00:00Z", "msg": "bad"}), *good[50:]]
    for fmt in JSON_FORMATS[:2]:
        table, _ = parse_whole(("\n".join(lines) + "\n").encode(), make_ctx(fmt))
        _check_batch(table, lines)
        assert "2999-06-01T00:00:00Z" in table.column("attrs")[50].as_py()
    body = "\n".join(lines).encode()
    table, repaired = _decoded(body, NDJSON)
    assert table.num_rows == 100 and repaired == 1
    attrs = json.loads(table.column("attrs")[50].as_py())
    assert attrs["ts"] == "2999-06-01T00:00:00Z" and attrs["ts_inferred"] == "previous" and PARSE_ERROR in attrs
    ts = table.column("ts").cast(pa.int64()).to_pylist()
    assert ts[50] == ts[49]  # the time of the nearest earlier timestamped record of the same source
    assert not math.isnan(ts[50])
