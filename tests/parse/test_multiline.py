"""Multi-line grouping: completeness across calls, bounds, interleaved streams."""

from __future__ import annotations

import json

from ranklog.parse import parse
from tests.parse.conftest import READ_TIME_NS, make_ctx, parse_whole, rows

HEADER = b"2026-12-02 13:04:05,123 - train - ERROR - failed\n"
TRACEBACK = b'Traceback (most recent call last):\n  File "a.py", line 1, in <module>\nValueError: bad\n'


def _read_on():
    """A context of a file whose first lines were read (a new file's first lines wait for eight:
    see ranklog.parse.inference.waits)."""
    ctx = make_ctx("python")
    parse(HEADER * 8, 0, ctx, final=True, read_time_ns=READ_TIME_NS)
    return ctx


def test_a_record_is_pending_until_the_next_record_starts():
    ctx = _read_on()
    first = parse(HEADER + TRACEBACK, 0, ctx, final=False, read_time_ns=READ_TIME_NS)
    assert first.consumed == 0 and first.batch.num_rows == 0  # the traceback may go on
    data = HEADER + TRACEBACK + b"2026-12-02 13:04:06,000 - train - INFO - next\n"
    second = parse(data, 0, ctx, final=False, read_time_ns=READ_TIME_NS)
    assert second.consumed == len(HEADER + TRACEBACK) and second.batch.num_rows == 1
    assert rows(second.batch)[0]["exc"].endswith("ValueError: bad")
    final = parse(data[second.consumed:], second.consumed, ctx, final=True, read_time_ns=READ_TIME_NS)
    assert final.consumed == len(data) - second.consumed and rows(final.batch)[0]["msg"] == "next"


def test_a_blank_line_completes_a_plain_record_but_not_a_traceback():
    ctx = _read_on()
    plain = parse(b"hello\n\n", 0, ctx, final=False, read_time_ns=READ_TIME_NS)
    assert plain.consumed == 7 and plain.batch.num_rows == 1
    tb = parse(TRACEBACK + b"\n", 0, ctx, final=False, read_time_ns=READ_TIME_NS)
    assert tb.consumed == 0  # "During handling of the above exception" may follow


def test_line_bound_splits_a_long_record_and_says_so():
    data = HEADER + b"Traceback (most recent call last):\n" + b"  frame\n" * 25 + b"ValueError: end\n"
    table, _ = parse_whole(data, make_ctx("python", options={"multiline_max_lines": 10}))
    got = rows(table)
    assert [r["exc"].count("\n") + 1 for r in got] == [9, 10, 8]  # + the header line = 28 lines
    assert [json.loads(r["attrs"])["multiline"] for r in got] == ["split", "continued", "continued"]
    assert got[0]["msg"] == "failed" and got[0]["level"] == "ERROR"
    first_frame = data.index(b"  frame\n")
    assert got[1]["offset"] == first_frame + 8 * len(b"  frame\n")  # line 11 of the record


def test_byte_bound_splits_too():
    data = b"head\n" + b"  " + b"x" * 600 + b"\n" + b"  " + b"y" * 600 + b"\n"
    table, _ = parse_whole(data, make_ctx("python", options={"multiline_max_bytes": 1000}))
    got = rows(table)
    assert len(got) == 2 and got[1]["msg"].strip() == "y" * 600
    assert json.loads(got[0]["attrs"]) == {"multiline": "split", "ts_inferred": "read"}


def test_default_bounds_are_2000_lines():
    data = b"head\n" + b"  line\n" * 4500
    table, _ = parse_whole(data, make_ctx("text"))
    assert table.num_rows == 3
    assert [r["msg"].count("\n") + 1 for r in rows(table)] == [2000, 2000, 501]


def test_interleaved_prefixed_streams_keep_each_traceback_whole():
    lines = []
    for line in TRACEBACK.decode().splitlines():
        lines.append(f"[default0]:{line}")
        lines.append(f"[default1]:{line.replace('bad', 'worse')}")
    data = ("\n".join(lines) + "\n").encode()
    got = rows(parse_whole(data, make_ctx("torchrun"))[0])
    assert [(r["local_rank"], r["role"], r["msg"]) for r in got] == [(0, "default", "ValueError: bad"),
                                                                     (1, "default", "ValueError: worse")]
    assert all(r["exc"].startswith("Traceback") and r["exc"].count("\n") == 2 for r in got)


def test_a_silent_stream_does_not_hold_back_the_others_forever():
    data = b"[default0]:2026-12-02 13:04:05,123 - t - INFO - a\n" + b"[default1]:tick\n" * 1200
    result = parse(data, 0, make_ctx("torchrun"), final=False, read_time_ns=READ_TIME_NS)
    assert result.batch.num_rows == 1200  # everything but the last line of the busy stream
    assert rows(result.batch)[0]["msg"] == "a"
