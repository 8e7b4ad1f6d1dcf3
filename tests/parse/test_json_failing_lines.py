"""JSON lines among lines the bulk reader rejects: records equal to each line parsed alone, at the bulk path's cost.

A JSON-lines file is seldom only JSON: a C++ library's warning, a ``print``, a line cut by a crash land
in it. Each such line must cost its own line, not a re-read of its whole 8 MB block: these tests
hold the records to the line-by-line oracle (every line parsed alone takes the line path) and count
how many bytes the JSON reader is handed for a block with failing lines."""

from __future__ import annotations

import json

import pyarrow.json as pa_json
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ranklog.parse.formats.ranklog import RANKLOG_MAPPING
from tests.parse.conftest import each_line_alone, json_lines


def _valid(i: int) -> bytes:
    return json.dumps({"ts": f"2026-12-02T13:04:{i % 60:02d}.{i:06d}Z", "level": "INFO", "msg": f"step {i}",
                       "rank": i % 8, "seq": i, "loss": i / 7}).encode()


# lines the bulk reader rejects, each for another reason, and lines that only change a column's type
ODD_LINES = [
    b"W1205 12:00:00.000000 4242 nccl.cc:99] NCCL WARN a C++ library writes into the JSON file",
    b'{"ts": "2026-12-02T13:04:05Z", "msg": "cut by a crash',
    b"null", b"[1, 2]", b'"a string"', b"42", b"{}",
    b'{"msg": "one"}{"msg": "two on a line"}',
    b'   {"msg": "padded object", "seq": 3}   ',
    b'{"msg": "trailing comma",}',
    b'{"ts": "not a time", "msg": "bad time"}',
    b'{"msg": "invalid utf-8 \xff inside"}',
    b'{"msg": "a rank that is text", "rank": "three"}',
    b'{"msg": "a rank past int32", "rank": 99999999999}',
    b'{"msg": "loss as text", "loss": "nan"}',
    b'{"msg": "nested", "data": {"a": [1, {"b": null}]}}',
    b'{"msg": "NaN literal", "loss": NaN}',
    b"", b"   ",
]
# the same fields spelled as other writers spell them: ints as text or as floats, other times
VARIANTS = [b'"3"', b'" 3"', b'"3_000"', b'"007"', b'"-0"', b'"99999999999999999999"', b'"three"', b"3.0", b"3.5",
            b"-2.0", b"1e20", b"9007199254740993", b"true", b"null", b"[3]"]
TIMES = [b'"2026-12-02 13:04:05"', b'"2026-12-02T13:04:05+02:00"', b'"2026-12-02T13:04:05.123456789Z"',
         b"1796216645", b"1796216645.5", b'"2999-01-01T00:00:00Z"', b'"yesterday"', b'""']


def _variant(i: int, rank: bytes, seq: bytes, ts: bytes, job: bytes = b'"j"') -> bytes:
    return b'{"ts": %s, "level": "WARNING", "msg": "variant %d", "rank": %s, "seq": %s, "job": %s}' % (
        ts, i, rank, seq, job)


LINES = st.one_of(st.integers(0, 999).map(_valid), st.sampled_from(ODD_LINES),
                  st.builds(_variant, st.integers(0, 999), st.sampled_from(VARIANTS), st.sampled_from(VARIANTS),
                            st.sampled_from(TIMES), st.sampled_from(VARIANTS)))


_parse = json_lines("ranklog", RANKLOG_MAPPING)


def _alone(lines: list[bytes]):
    return each_line_alone(_parse, lines)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(LINES, min_size=1, max_size=60))
def test_records_are_those_of_each_line_parsed_alone(lines: list[bytes]) -> None:
    assert _parse(b"\n".join(lines) + b"\n") == _alone(lines)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(VARIANTS), st.lists(st.booleans(), min_size=3, max_size=40))
def test_a_field_spelled_two_ways_in_one_block_is_read_as_alone(spelling: bytes, odd: list[bool]) -> None:
    """Runs of one spelling among plain lines: the reader sees a column change type, or a column
    of another type than the field's, and every line's record is still the one it has alone."""
    lines = [_variant(i, spelling if flag else b"%d" % (i % 8), b"%d" % i, b'"2026-12-02T13:04:05Z"')
             for i, flag in enumerate(odd)]
    assert _parse(b"\n".join(lines) + b"\n") == _alone(lines)


def test_a_block_with_failing_lines_is_read_about_twice_not_once_per_bisection(monkeypatch) -> None:
    """1% of the lines are text and 1% cut objects: the reader is handed ~2× the block's bytes
    (bisecting handed it ~15×, and one read per small block), and the records are the oracle's."""
    handed = _counting_reads(monkeypatch)
    lines = [_valid(i) for i in range(4000)]
    for at in range(37, 4000, 50):
        lines[at] = ODD_LINES[0] if at % 100 == 37 else ODD_LINES[1]
    data = b"\n".join(lines) + b"\n"
    got = _parse(data)
    assert sum(handed) < 2.2 * len(data), (len(handed), sum(handed) / len(data))
    assert len(handed) <= 90  # one read per failing line at most, and one for the rest
    assert got == _alone(lines)
    assert got[1] == 80  # every odd line is a parse error, kept as a text record
    assert [r["seq"] for r in got[0] if r["format"] == "ranklog"] == [i for i in range(4000) if (i - 37) % 50]


def _counting_reads(monkeypatch) -> list[int]:
    """The sizes of the buffers handed to the JSON reader from now on."""
    handed: list[int] = []
    read_json = pa_json.read_json
    monkeypatch.setattr(pa_json, "read_json", lambda source, **kw: (handed.append(source.size()),
                                                                      read_json(source, **kw))[1])
    return handed


def test_a_change_of_a_value_type_costs_a_few_reads_not_a_bisection(monkeypatch) -> None:
    """The reader also stops where a column's type changes (a number, then text): that valid line takes
    the line path, and a block whose type changed for good is split where the reader stopped — one
    line as in a real run where a metric turns to "nan", and a file whose field changed type."""
    handed = _counting_reads(monkeypatch)
    lines = [_valid(i) for i in range(10)] + [b'{"msg": "loss as text", "loss": "nan"}'] + [_valid(i) for i in range(10, 20)]
    got, errors = _parse(b"\n".join(lines) + b"\n")
    assert errors == 0 and [r["format"] for r in got] == ["ranklog"] * 21
    assert json.loads(got[10]["attrs"]) == {"loss": "nan"}
    assert (got, errors) == _alone(lines)

    handed.clear()
    lines = [_valid(i) for i in range(300)] + [_valid(i).replace(b'"loss": ', b'"loss": "') .replace(b"}", b'"}')
                                               for i in range(300, 600)]
    got, errors = _parse(b"\n".join(lines) + b"\n")
    assert errors == 0 and [r["seq"] for r in got] == list(range(600))
    # the failing read, the rest after that line, both parts as one (failing where the type changed),
    # then each part (bisecting: dozens)
    assert len(handed) <= 5, handed
    assert (got, errors) == _alone(lines)


def test_values_a_field_cannot_hold_send_their_rows_alone_to_the_line_path(monkeypatch) -> None:
    """A time that is none, a rank past int32: those rows take the line path
    (their values kept in attrs, as there), the block is read once more without them — bisecting it
    instead re-read it ~log2(k) times for k such rows."""
    handed = _counting_reads(monkeypatch)
    lines = [_valid(i) for i in range(2000)]
    for at in range(41, 2000, 100):
        lines[at] = lines[at].replace(b'"ts": "2026', b'"ts": "yesterday, 2026')
    lines[77] = lines[77].replace(b'"rank": 5', b'"rank": 99999999999')
    got, errors = _parse(b"\n".join(lines) + b"\n")
    assert len(handed) == 2, handed  # the block, then the block without those rows
    assert errors == 21 and [r["seq"] for r in got] == list(range(2000))
    assert json.loads(got[41]["attrs"])["ts"].startswith("yesterday")
    assert (got, errors) == _alone(lines)


def test_integers_written_as_text_or_beside_floats_stay_on_the_bulk_path(monkeypatch) -> None:
    """``"rank": "3"`` on every line (a rank taken from the environment), or one ``"seq": 2.5`` that
    makes the reader read the column as floats: one read, as for clean lines (before, every line of
    such a block took the line path, ~25 µs a line against ~1.5)."""
    handed = _counting_reads(monkeypatch)
    lines = [_valid(i).replace(b'"rank": %d' % (i % 8), b'"rank": "%d"' % (i % 8)) for i in range(500)]
    got, errors = _parse(b"\n".join(lines) + b"\n")
    assert len(handed) == 1 and errors == 0 and [r["rank"] for r in got] == [i % 8 for i in range(500)]
    assert (got, errors) == _alone(lines)

    handed.clear()
    lines = [_valid(i) for i in range(500)]
    lines[250] = lines[250].replace(b'"seq": 250', b'"seq": 2.5')
    got, errors = _parse(b"\n".join(lines) + b"\n")
    assert len(handed) == 2, handed  # the block, then the block without the line whose seq is no integer
    assert errors == 1 and [r["seq"] for r in got] == [*range(250), None, *range(251, 500)]
    assert (got, errors) == _alone(lines)


def test_lines_the_reader_reads_wrong_are_found_by_their_bytes_not_by_bisection(monkeypatch) -> None:
    """Invalid UTF-8 inside a value (the reader passes it through), two objects on one line (the reader
    makes two rows), nesting deeper than the reader may be handed: the block fails as a whole, the
    lines are found by their bytes and take the line path, the rest is read once more."""
    handed = _counting_reads(monkeypatch)
    lines = [_valid(i) for i in range(2000)]
    for at in range(13, 2000, 100):
        lines[at] = lines[at].replace(b"step", b"st\xffep")
    for at in range(63, 2000, 100):
        lines[at] = lines[at] + b' {"msg": "a second object"}'
    lines[500] = lines[500][:-1] + b', "deep": ' + b"[" * 1200 + b"]" * 1200 + b"}"
    got, errors = _parse(b"\n".join(lines) + b"\n")
    assert len(handed) <= 4, handed
    assert [r["msg"] for r in got[13:14]] == ["st\ufffdep 13"] and errors == 21
    assert (got, errors) == _alone(lines)


def test_failures_on_every_other_line_cost_the_line_path_not_a_try_each(monkeypatch) -> None:
    """Two writers interleaved, one writing ranks as numbers and one as names: the reader fails every
    other line. Each failure within a few lines of the last sends a run of lines (doubling) to the
    line path instead of trying the reader again: a handful of tries, not one per line."""
    handed = _counting_reads(monkeypatch)
    lines = [_valid(i) if i % 2 else _valid(i).replace(b'"rank": %d' % (i % 8), b'"rank": "r%d"' % i)
             for i in range(600)]
    got, errors = _parse(b"\n".join(lines) + b"\n")
    assert len(handed) <= 8, len(handed)
    assert errors == 300 and [r["seq"] for r in got] == list(range(600))
    assert (got, errors) == _alone(lines)
