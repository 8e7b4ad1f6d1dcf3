"""JSON keys that rival for one field (``level`` and ``levelname``, ``timestamp_ns`` and ``asctime``): the
first key of the mapping with a value fills it, the others go to ``attrs`` as the line spelled them —
the records of each line parsed alone."""

from __future__ import annotations

from ranklog.parse import json_bulk
from ranklog.parse.formats.json import build_mapping
from tests.parse.conftest import READ_TIME_NS, make_ctx, rows

MAPPING = build_mapping(None)


def _parse(data: bytes, base: int = 0):
    result = json_bulk.parse_json_lines(data, base, make_ctx("json"), final=True, read_time_ns=READ_TIME_NS,
                                        mapping=MAPPING, infer_time=False)
    return rows(result.batch), result.errors


def _alone(lines: list[bytes]):
    """The oracle: each line parsed on its own (a block of one line takes the line path)."""
    got, errors, offset = [], 0, 0
    for line in lines:
        one, err = _parse(line + b"\n", offset)
        got += one
        errors += err
        offset += len(line) + 1
    return got, errors



def test_a_rival_key_null_in_every_line_claims_nothing() -> None:
    """The reader types a key that is null in every line of a block as null, which no kernel
    coalesces with the rival's column: the parse raised, and a parse error stops the agent."""
    for lines in ([b'{"level": null, "levelname": "WARNING", "msg": "c"}'] * 3,
                  [b'{"time": null, "timestamp_ns": 1796377851727671680, "msg": "t"}'] * 3):
        assert _parse(b"\n".join(lines) + b"\n") == _alone(lines)
    assert {row["level"] for row in _parse(b'{"level": null, "levelname": "WARNING"}\n' * 3)[0]} == {"WARNING"}


def test_a_whole_number_among_floats_keeps_its_spelling() -> None:
    """The reader makes one column of doubles of 20 and 2.5; attrs keeps 20 as the line wrote it, and 6.0."""
    lines = [b'{"msg": "a", "lineno": 20}', b'{"msg": "b", "lineno": 2.5}', b'{"msg": "c", "lineno": 6.0}']
    assert [row["attrs"] for row in _parse(b"\n".join(lines) + b"\n")[0]] == [
        '{"lineno":20}', '{"lineno":2.5}', '{"lineno":6.0}']
