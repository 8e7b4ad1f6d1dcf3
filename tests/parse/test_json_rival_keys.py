"""Keys that rival for one field, in bulk: records equal to each line parsed alone, without Python per line.

Ray's structured logging writes ``timestamp_ns`` and ``asctime`` on every line, other loggers ``level``
beside ``levelname`` or ``message`` beside ``msg``. The first key of the mapping with a value fills
the field; the others go to ``attrs`` as the line spelled them. Every such line used to be decoded
again in Python for its attrs (~25 µs a line against ~1.5 for the rest of the block)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ranklog.parse import json_bulk
from ranklog.parse.formats.json import build_mapping
from tests.parse.conftest import each_line_alone, json_lines

MAPPING = build_mapping(None)

# (key, the values a writer may give it), in the order one logger writes its keys
KEYS: list[tuple[str, list[str]]] = [
    ("asctime", ['"2026-12-04 09:50:51,727"', '"2026-12-04T09:50:51.5Z"', "null", '"not a time"', "1796377851"]),
    ("levelname", ['"INFO"', '"warning"', "null", "30"]),
    ("message", ['"tokenized chunk 0"', '"say \\"hi\\"\\tthere"', "null", "7", '"caf\\u00e9 ☕"']),
    ("level", ['"ERROR"', "null"]),
    ("msg", ['"from msg"', "null", '{"nested": 1}']),
    ("filename", ['"driver.py"', "null", '"a\\\\b.py"']),
    ("lineno", ["20", "null", "2.5", "1e20"]),
    ("process", ["7847", "null", '"7847"', "2.5"]),
    ("pid", ["11", "null"]),
    ("job_id", ['"01000000"', "12345", "null", "true"]),
    ("name", ['"ray.data"', "null"]),
    ("logger", ['"verl"', "null", "[1, 2]"]),
    ("timestamp_ns", ["1796377851727671680", "null", '"1796377851727671680"', "1.5"]),
    ("worker_id", ['"1acbc450"', "null"]),
]


# members that make a line's key order hard to see in its bytes: a key holding an escaped quote and
# another key's name, a space before the colon, a nested value holding a key
ODD_MEMBERS = ['"x\\"filename": 1', '"worker_id" : "spaced"', '"data": {"lineno": [1]}', '"name\\u00e9": "e"']


@st.composite
def _lines(draw) -> bytes:
    """A line of a logger that writes its keys in one order (most lines) or in any order."""
    members = [f'"{key}": {draw(st.sampled_from(values))}' for key, values in KEYS if draw(st.booleans())]
    members += draw(st.lists(st.sampled_from(ODD_MEMBERS), max_size=2, unique=True))
    if draw(st.integers(0, 4)) == 0:
        members = draw(st.permutations(members))
    return ("{" + ", ".join(members) + "}").encode()


_parse = json_lines("json", MAPPING)


def _alone(lines: list[bytes]):
    return each_line_alone(_parse, lines)


RAY = (b'{"asctime": "2026-12-04 09:50:51,727", "levelname": "INFO", "message": "[Rank 1] tokenized chunk %d", '
       b'"filename": "driver.py", "lineno": 20, "process": 7847, "job_id": "01000000", "worker_id": "1acbc450", '
       b'"task_name": "tokenize_shard", "timestamp_ns": 17963778517276716%02d}')


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_lines(), min_size=3, max_size=40))
@example([RAY % (i, i) for i in range(5)])
@example([b'{"level": "ERROR", "msg": "a", "levelname": "INFO"}', b'{"levelname": "INFO", "msg": "b"}',
          b'{"level": null, "levelname": "WARNING", "msg": "c"}'])
def test_rival_keys_give_the_records_of_each_line_parsed_alone(lines: list[bytes]) -> None:
    assert _parse(b"\n".join(lines) + b"\n") == _alone(lines)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_lines_with_the_same_keys_in_other_orders_keep_their_own_order(data) -> None:
    """One set of keys, most lines in one order and some in others: each line's attrs in its own order."""
    keys = data.draw(st.lists(st.sampled_from(KEYS + [(member, [""]) for member in ODD_MEMBERS]), min_size=2,
                              max_size=8, unique_by=lambda kv: kv[0]))
    lines = []
    for _ in range(data.draw(st.integers(3, 30))):
        members = [key if key in ODD_MEMBERS else f'"{key}": {data.draw(st.sampled_from(values))}' for key, values in keys]
        if data.draw(st.integers(0, 3)) == 0:
            members = data.draw(st.permutations(members))
        lines.append(("{" + ", ".join(members) + "}").encode())
    assert _parse(b"\n".join(lines) + b"\n") == _alone(lines)


def test_a_key_found_inside_another_key_is_not_taken_for_it() -> None:
    """``"b":`` is in the bytes of the key ``a"b`` (spelled ``"a\\"b":``): a line writing ``c`` before its
    real ``b`` must not pass for one in the order b, c."""
    mapping = {**MAPPING, "msg": ('a"b', *MAPPING["msg"])}
    lines = [b'{"a\\"b": "m", "b": 1, "c": 2}'] * 3 + [b'{"a\\"b": "m", "c": 3, "b": 4}']
    got, _ = json_lines("json", mapping)(b"\n".join(lines) + b"\n")
    assert [row["msg"] for row in got] == ["m"] * 4
    assert [row["attrs"] for row in got] == ['{"b":1,"c":2}'] * 3 + ['{"c":3,"b":4}']


def test_a_rival_key_null_in_every_line_claims_nothing() -> None:
    """The reader types a key that is null in every line of a block as null, which no kernel
    coalesces with the rival's column: the parse raised, and a parse error stops the agent."""
    for lines in ([b'{"level": null, "levelname": "WARNING", "msg": "c"}'] * 3,
                  [b'{"time": null, "timestamp_ns": 1796377851727671680, "msg": "t"}'] * 3):
        assert _parse(b"\n".join(lines) + b"\n") == _alone(lines)
    assert {row["level"] for row in _parse(b'{"level": null, "levelname": "WARNING"}\n' * 3)[0]} == {"WARNING"}


def test_a_whole_number_among_floats_keeps_its_spelling(monkeypatch) -> None:
    """The reader makes one column of doubles of 20, 2.5 and 6.0; attrs keeps each as the line wrote it,
    read from the line's bytes (a float epoch on every line must not send every line to Python)."""
    by_python: list[dict] = []
    real = json_bulk._BlockReader._extras_json
    monkeypatch.setattr(json_bulk._BlockReader, "_extras_json", lambda self, obj: by_python.append(obj) or real(self, obj))
    lines = [b'{"msg": "a", "lineno": 20}', b'{"msg": "b", "lineno": 2.5}', b'{"msg": "c", "lineno": 6.0}',
             b'{"msg": "d", "lineno" : 7}', b'{"msg":"e","lineno":-0,"x":1}', b'{"msg": "f", "lineno": 1e2}',
             b'{"msg": "g", "a\\"lineno": 1, "lineno": 3.0}', b'{"msg": "h", "lineno": -0.0}']
    assert [row["attrs"] for row in _parse(b"\n".join(lines) + b"\n")[0]] == [
        '{"lineno":20}', '{"lineno":2.5}', '{"lineno":6.0}', '{"lineno":7}', '{"lineno":0,"x":1}', '{"lineno":100.0}',
        '{"a\\"lineno":1,"lineno":3.0}', '{"lineno":-0.0}']
    # only the lines whose spelling the bytes do not show plainly: a space before the colon, the key
    # also inside another key, a negative zero (-0 too: the reader makes it -0.0)
    assert [obj["msg"] for obj in by_python] == ["d", "e", "g", "h"]
    epochs = b"".join(b'{"msg": "step %d", "epoch": %d.0, "lr": 0.%d}\n' % (i, i // 10, i % 9 + 1) for i in range(100))
    by_python.clear()
    assert [row["attrs"] for row in _parse(epochs)[0]][19] == '{"epoch":1.0,"lr":0.2}' and by_python == []


def test_a_key_is_looked_for_in_its_own_line_only() -> None:
    """The second line writes y before x; the y after its x is the next line's."""
    lines = [b'{"x": 1, "y": 2}', b'{"y": 3, "x": 4}', b'{"x": 5, "y": 6, "z": 7}', b'{"x": 8, "y": 9}']
    assert [row["attrs"] for row in _parse(b"\n".join(lines) + b"\n")[0]] == [
        '{"x":1,"y":2}', '{"y":3,"x":4}', '{"x":5,"y":6,"z":7}', '{"x":8,"y":9}']


def test_ray_json_lines_take_no_line_path(monkeypatch) -> None:
    """Every line's losing ``asctime`` goes to attrs column-wise: no line is decoded in Python."""
    by_python: list[dict] = []
    real = json_bulk._BlockReader._extras_json
    monkeypatch.setattr(json_bulk._BlockReader, "_extras_json", lambda self, obj: by_python.append(obj) or real(self, obj))
    got, errors = _parse(b"\n".join(RAY % (i, i % 100) for i in range(200)) + b"\n")
    assert by_python == [] and errors == 0
    # an actor's lines (actor_id among the keys) after task lines: the reader's column comes last
    actor = RAY.replace(b'"worker_id"', b'"actor_id": "a1", "worker_id"')
    assert _parse(b"\n".join([RAY % (1, 1), actor % (2, 2), RAY % (3, 3), actor % (4, 4)]) + b"\n")[1] == 0
    assert by_python == []
    assert json.loads(got[7]["attrs"]) == {"asctime": "2026-12-04 09:50:51,727", "filename": "driver.py", "lineno": 20,
                                           "worker_id": "1acbc450", "task_name": "tokenize_shard"}
    assert got[7]["msg"] == "[Rank 1] tokenized chunk 7" and got[7]["level"] == "INFO" and got[7]["pid"] == 7847
