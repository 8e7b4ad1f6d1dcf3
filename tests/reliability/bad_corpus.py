"""The bad-input corpus: hostile log lines and files, generated (not committed) so binary and huge items stay out of git.

``build(root)`` writes one directory per item, laid out as ranklog logger files
(``<item>/node0/rank-0.pid-<n>.0000.jsonl``), so both the agent (``--source '<root>/**/*'``, format
recognised by name) and ``ranklog query --log_dir`` read them with the ``ranklog`` JSON parser. The
binary item is named like an accidental match of a broad glob (``dump.bin``): the agent reads it as
``text`` (unknown names are never guessed), query's directory reader skips unrecognised names.

Small text items come from ``corpus/*.jsonl`` (checked in, readable in a diff); the generated ones
(10 MB lines, deep nesting, random bytes, bytes that are not UTF-8) are built here, deterministically.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

CORPUS_DIR = Path(__file__).with_name("corpus")
TS = "2026-12-02T13:04:05.123456Z"
TEN_MB = 10 * 1024 * 1024


def _ok(n: int, item: str) -> bytes:
    """A well-formed ranklog line (the context around the bad ones)."""
    return json.dumps({"ts": TS, "level": "INFO", "msg": f"{item} good line {n}", "job": item}).encode()


def _checked_in(name: str) -> Callable[[], bytes]:
    return lambda: (CORPUS_DIR / f"{name}.jsonl").read_bytes()


def _invalid_utf8() -> bytes:
    lines = [
        b'{"ts": "' + TS.encode() + b'", "level": "INFO", "msg": "latin-1 caf\xe9 inside a JSON string"}',
        b'{"ts": "' + TS.encode() + b'", "level": "INFO", "msg": "lone continuation \x80\x80 bytes"}',
        b"plain text with an invalid start byte \xff\xfe and a truncated sequence \xe2\x82",
        b'{"msg": "overlong slash \xc0\xaf and a surrogate \xed\xa0\x80"}',
        b'{"level": "\xff\xffERROR", "msg": "bad bytes in a known field"}',
        b'{"caf\xe9": "bad bytes in a key"}',
        b"\xfe\xff\xfe\xff",
    ]
    return _wrap("invalid_utf8", lines)


def _nul_bytes() -> bytes:
    lines = [
        b'{"ts": "' + TS.encode() + b'", "level": "INFO", "msg": "raw NUL \x00 inside a string"}',
        b'{"msg": "escaped NUL \\u0000 is valid JSON"}',
        b"\x00\x00\x00\x00",
        b"text\x00with\x00nuls",
        b'{"msg": "ok"}\x00',
        b"\x00" * 4096,
    ]
    return _wrap("nul_bytes", lines)


def _huge_lines() -> bytes:
    """Two 10 MB lines: one a valid JSON record, one plain text."""
    big_json = json.dumps({"ts": TS, "level": "ERROR", "msg": "J" * TEN_MB}).encode()
    big_text = b"T" * TEN_MB
    return _wrap("huge_lines", [big_json, big_text])


def _deep_nesting() -> bytes:
    lines = [
        b'{"msg": "500 deep", "attrs_deep": ' + b'{"a": ' * 500 + b"1" + b"}" * 500 + b"}",
        b'{"msg": "deeper than any parser recurses", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"a": ' * 50_000 + b"1" + b"}" * 50_000,
        b"[" * 200_000,
        b'{"unbalanced": ' + b'{"a": ' * 20_000,
    ]
    return _wrap("deep_nesting", lines)


def _extreme_values() -> bytes:
    """Issue 20's crash line among 99 good ones, then known fields at extreme and wrong values.

    The good lines carry whole-second times, so pyarrow's reader infers ``timestamp[s]`` for the
    block, and year 2999 does not fit nanoseconds: the line that once killed the agent for good.
    """
    good = [json.dumps({"ts": f"2026-12-02T13:{n // 60:02d}:{n % 60:02d}Z", "level": "INFO",
                        "msg": f"extreme_values good line {n}"}).encode() for n in range(99)]
    crash = json.dumps({"ts": "2999-06-01T00:00:00Z", "level": "ERROR", "msg": "year 2999"}).encode()
    extremes = [{"ts": ts, "level": "INFO", "msg": f"ts {ts!r}"} for ts in (
        "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z", "10000-01-01T00:00:00Z", "1500-01-01 00:00:00",
        "2026-13-45T25:61:61Z", 1_796_220_000, 1_796_220_000_123, 1_796_220_000_123_456, 1_796_220_000_123_456_789,
        -1, -62_135_596_800, 2**63, 2**70, 1e300, -1e300, {"nested": {"ts": 1}}, [1, 2], "")]
    extremes += [{"ts": "2026-12-02T13:04:05Z", "msg": "ints", "rank": 2**31, "pid": -(2**40), "step": 2**64,
                  "seq": 1e19, "local_rank": "NaN"}]
    bad = [crash] + [json.dumps(obj).encode() for obj in extremes]
    bad += [b'{"ts": NaN, "msg": "NaN time", "step": Infinity}', b'{"ts": -Infinity, "msg": "minus infinity"}']
    return b"\n".join(good[:50] + bad[:1] + good[50:]) + b"\n" + _wrap("extreme_values", bad[1:])


def _binary(seed: int = 1234, size: int = 2 * 1024 * 1024) -> bytes:
    return random.Random(seed).randbytes(size)


def _wrap(item: str, bad: list[bytes]) -> bytes:
    """The bad lines, each between good ones, newline-terminated."""
    out: list[bytes] = [_ok(0, item)]
    for n, line in enumerate(bad, 1):
        out += [line, _ok(n, item)]
    return b"\n".join(out) + b"\n"


@dataclass(frozen=True)
class Item:
    name: str
    what: str  # one line for RELIABILITY.md
    content: Callable[[], bytes]
    file_name: str = "rank-0.pid-100.0000.jsonl"

    def path(self, root: Path) -> Path:
        return root / self.name / "node0" / self.file_name


ITEMS: tuple[Item, ...] = (
    Item("malformed_json", "malformed JSON: unterminated strings, trailing commas, two objects on a line, "
         "arrays/scalars instead of objects, stray braces", _checked_in("malformed_json")),
    Item("truncated_json", "a file ending in the middle of a JSON object, no final newline",
         _checked_in("truncated_json")),
    Item("invalid_utf8", "bytes that are not UTF-8 inside strings, keys, known fields and plain text",
         _invalid_utf8),
    Item("nul_bytes", "raw and escaped NUL bytes, NUL-only lines, a 4 KiB NUL run", _nul_bytes),
    Item("huge_lines", "two 10 MB lines (a valid JSON record and plain text)", _huge_lines),
    Item("deep_nesting", "JSON nested 500, 20,000, 50,000 and 100,000 levels deep, unbalanced",
         _deep_nesting),
    Item("huge_numbers", "1e400, 2^64+, -2^63-1, NaN/Infinity, fractional and negative ints in int fields",
         _checked_in("huge_numbers")),
    Item("wrong_types", "known fields with the wrong JSON type (rank \"zero\", msg an object, ts a bool, …)",
         _checked_in("wrong_types")),
    Item("extreme_values", "issue 20's crash line (ts year 2999 among 99 whole-second lines), then ts from year 1 "
         "to 10000, epoch s/ms/µs/ns, negatives, 2^63+, ±1e300, NaN/±Infinity, objects; ints past int32/int64",
         _extreme_values),
    Item("ansi", "ANSI colour/cursor escapes, raw ESC in JSON strings (invalid JSON) and escaped (valid)",
         _checked_in("ansi")),
    Item("binary", "2 MiB of random bytes in a file a broad glob matches (dump.bin)", _binary, "dump.bin"),
)


def build(root: Path) -> dict[str, Path]:
    """Write every item under `root`; returns item name → file path."""
    paths = {}
    for item in ITEMS:
        path = item.path(root)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(item.content())
        paths[item.name] = path
    return paths

