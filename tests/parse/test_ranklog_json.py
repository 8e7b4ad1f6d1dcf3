"""The `ranklog` JSON-lines parser: bulk path, fallbacks, types, offsets, attrs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import datetime, timezone

from ranklog.parse import parse
from tests.helpers.layouts import ranklog_line
from tests.parse.conftest import READ_TIME_NS, make_ctx, parse_whole, rows

T0 = datetime(2026, 12, 2, 13, 4, 5, 123456, tzinfo=timezone.utc)
T0_NS = 1_796_216_645_123_456_000


def _line(seq: int, **extra) -> str:
    return ranklog_line(T0, "INFO", f"step {seq}", host="node7", ip="10.0.0.7", pid=321, rank=5, local_rank=1,
                        job="run9", seq=seq, step=seq, **extra)


def test_logger_lines_become_records_with_every_field():
    data = (_line(1) + "\n" + _line(2, loss=0.25, note="warm") + "\n").encode()
    table, errors = parse_whole(data, make_ctx("ranklog"))
    assert errors == 0
    first, second = rows(table)
    assert first["ts"] == T0_NS
    assert (first["level"], first["msg"], first["logger"], first["host"], first["ip"]) == \
        ("INFO", "step 1", "train", "node7", "10.0.0.7")
    assert (first["pid"], first["rank"], first["local_rank"], first["job"], first["step"], first["seq"]) == \
        (321, 5, 1, "run9", 1, 1)
    assert first["attrs"] is None
    assert json.loads(second["attrs"]) == {"loss": 0.25, "note": "warm"}
    assert (first["offset"], second["offset"]) == (0, len(_line(1)) + 1)
    assert {r["format"] for r in rows(table)} == {"ranklog"}
    assert {r["source"] for r in rows(table)} == {"/logs/x.log"}


def test_offsets_are_exact_bytes_with_base_offset_crlf_and_multibyte_text():
    lines = [json.dumps({"ts": "2026-12-02T13:04:05Z", "level": "info", "msg": "héllo ✓"}, ensure_ascii=False),
             "", json.dumps({"msg": "second"})]
    data = "\r\n".join(lines).encode() + b"\r\n"
    table, _ = parse_whole(data, make_ctx("ranklog"), base_offset=1000)
    got = rows(table)
    assert [r["offset"] for r in got] == [1000, 1000 + data.index(b'{"msg": "second"}')]
    assert got[0]["msg"] == "héllo ✓"


def test_incomplete_last_line_is_not_consumed_until_final():
    data = (_line(1) + "\n" + _line(2)[:40]).encode()
    result = parse(data, 0, make_ctx("ranklog"), final=False, read_time_ns=READ_TIME_NS)
    assert result.consumed == len(_line(1)) + 1
    assert result.batch.num_rows == 1


def test_malformed_lines_are_kept_as_text_records_with_the_error():
    data = b"\n".join([_line(1).encode(), b"not json at all", b"[1, 2]", b'{"a":1} {"b":2}', b'{"msg": "unterminated',
                       _line(2).encode()]) + b"\n"
    table, errors = parse_whole(data, make_ctx("ranklog"))
    got = rows(table)
    assert errors == 4
    assert [r["format"] for r in got] == ["ranklog", "text", "text", "text", "text", "ranklog"]
    assert got[1]["msg"] == "not json at all"
    assert "parse_error" in json.loads(got[1]["attrs"])
    assert json.loads(got[2]["attrs"])["parse_error"].startswith("not a JSON object")
    assert [r["offset"] for r in got] == [0, *[data.index(x) for x in (b"not json", b"[1, 2]", b'{"a":1} {', b'{"msg": "un')],
                                          data.index(_line(2).encode())]


def test_wrong_types_in_known_fields_go_to_attrs_and_the_rest_survives():
    data = b"\n".join([
        b'{"ts": "yesterday", "level": "warn", "msg": 12, "rank": "x", "pid": 99999999999, "step": 1.5}',
        b'{"ts": 1796216645.5, "level": 40, "msg": "epoch seconds", "seq": 123456789012345678901234567890}',
    ]) + b"\n"
    table, errors = parse_whole(data, make_ctx("ranklog", fields={"rank": 4}))
    assert errors == 2  # both records kept, each counted once as a parse error (issue 20)
    first, second = rows(table)
    assert first["level"] == "WARNING" and first["msg"] == "12"
    assert first["ts"] == second["ts"]  # at the head of the file: the next line's time, marked
    assert first["rank"] == 4  # the layout default, since the line's value was not a rank
    attrs = json.loads(first["attrs"])
    assert attrs["ts_inferred"] == "next"
    assert attrs["ts"] == "yesterday" and attrs["rank"] == "x" and attrs["pid"] == 99999999999 and attrs["step"] == 1.5
    assert attrs["parse_error"] == "unusable value in: pid, rank, step, ts"
    assert second["ts"] == 1_796_216_645_500_000_000 and second["level"] == "ERROR"
    assert json.loads(second["attrs"])["seq"] == 123456789012345678901234567890


def test_extra_values_are_kept_exactly_as_written():
    line = {"ts": "2026-12-02T13:04:05.123456Z", "level": "INFO", "msg": "m", "when": "2026-12-02 13:04:05",
            "big": 123456789012345678901234567890, "nested": {"a": [1, {"b": None}]}, "quote": 'say "hi"\n',
            "flag": True, "n": -3}
    data = (json.dumps(line) + "\n").encode() * 20  # enough lines for the bulk path
    table, _ = parse_whole(data, make_ctx("ranklog"))
    attrs = [json.loads(a) for a in table.column("attrs").to_pylist()]
    expected = {k: v for k, v in line.items() if k not in ("ts", "level", "msg")}
    assert attrs == [expected] * 20


def test_layout_fields_fill_only_what_the_line_lacks_and_extra_layout_fields_go_to_attrs():
    data = b'{"msg": "a", "rank": 2}\n{"msg": "b"}\n'
    ctx = make_ctx("ranklog", fields={"rank": 7, "job": "from-path", "attempt": 3})
    got = rows(parse_whole(data, ctx)[0])
    assert [r["rank"] for r in got] == [2, 7]
    assert [r["job"] for r in got] == ["from-path", "from-path"]
    assert [json.loads(r["attrs"]) for r in got] == [{"attempt": 3, "ts_inferred": "read"}] * 2


def test_many_lines_with_a_few_bad_ones_keep_order_and_count():
    good = [_line(i, loss=i / 10) for i in range(500)]
    lines = list(good)
    for position in (3, 250, 499):
        lines.insert(position, f"garbage {position} \x00\xff".encode("latin-1").decode("latin-1"))
    data = ("\n".join(lines) + "\n").encode("utf-8")
    table, errors = parse_whole(data, make_ctx("ranklog"))
    assert table.num_rows == len(lines) and errors == 3
    offsets = table.column("offset").to_pylist()
    assert offsets == sorted(offsets)
    seqs = [s for s in table.column("seq").to_pylist() if s is not None]
    assert seqs == list(range(500))


def test_invalid_utf8_inside_a_value_is_replaced_in_a_block_the_json_reader_takes():
    """pyarrow's JSON reader passes invalid UTF-8 inside string values through (an invalid Arrow string
    array, which crashed the level mapping): the block falls back, and those lines keep their record
    with U+FFFD, as lines parsed one by one do; the rest stay on the fast path."""
    lines = [_line(i).encode() for i in range(20)]
    lines[4] = _line(4).encode().replace(b'"INFO"', b'"\xff"')
    lines[11] = _line(11).encode().replace(b"step 11", b"step \xfe11")
    table, _ = parse_whole(b"\n".join(lines) + b"\n", make_ctx("ranklog"))
    got = rows(table)
    assert [r["seq"] for r in got] == list(range(20))
    assert got[11]["msg"] == "step \ufffd11" and got[4]["msg"] == "step 4"
    assert got[4]["level"] == "UNKNOWN"  # "\ufffd" is no level name
    table.validate(full=True)


def test_a_line_that_is_not_an_object_is_kept_as_text_wherever_it_falls_in_a_block():
    """pyarrow's JSON reader crashes the process on a block whose first line is ``null`` (pyarrow 26: a
    segfault, the agent gone) and turns a ``null`` further down into a record of nulls; such lines
    must take the line path, wherever the reader's blocks start: every one a text record with its
    parse error. Run in a child process, so that a crash fails this test and not the session."""
    script = textwrap.dedent('''
        import json, time
        from ranklog import parse
        ctx = parse.SourceContext(source="/x", source_id="s", format="ranklog", host="h", ip="1")
        good = [b'{"ts": "2026-12-02T13:04:05Z", "msg": "good %d"}' % i for i in range(6)]
        out = []
        for lines in (b"null", *good), (*good[:3], b"null", *good[3:]), (b"  null", b"true", *good):
            result = parse.parse(b"\\n".join(lines) + b"\\n", 0, ctx, final=False, read_time_ns=time.time_ns())
            out.append([result.batch.column("format").to_pylist(), result.batch.column("msg").to_pylist(), result.errors])
        print(json.dumps(out))
    ''')
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"the parse crashed ({done.returncode}): {done.stderr[-1000:]}"
    first, middle, spaced = json.loads(done.stdout)
    assert first == [["text"] + ["ranklog"] * 6, ["null"] + [f"good {i}" for i in range(6)], 1]
    assert middle == [["ranklog"] * 3 + ["text"] + ["ranklog"] * 3,
                      [f"good {i}" for i in range(3)] + ["null"] + [f"good {i}" for i in range(3, 6)], 1]
    assert spaced[0][:2] == ["text", "text"] and spaced[2] == 2
