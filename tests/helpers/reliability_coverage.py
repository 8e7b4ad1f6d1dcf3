"""Prove that records cover every byte-range of a log file: each non-blank line is a record or inside one.

Records are matched to the input by their ``offset`` (the byte where their first line starts). For
a file of N non-blank lines the check is:

- every record offset is the start of a non-blank line, and no offset appears twice;
- every non-blank line either starts a record, or is a continuation whose text (decoded the way the
  parsers decode: UTF-8 with replacement, ANSI escapes removed) appears in the ``msg`` or ``exc`` of
  the record before it (multi-line grouping of the text formats);
- a line kept as a ``text`` record because its format did not parse carries the whole line as ``msg``;
  a parsed record with values its fields cannot hold names them in ``parse_error`` and keeps each
  in ``attrs`` under the field's name.

So a skipped line, a line shifted to a wrong offset, or a record that kept only part of its line
shows up as a named failure, not as a count that happens to match.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field

import pyarrow as pa

from ranklog.parse.ansi import strip_ansi_text


def decoded(raw: bytes) -> str:
    """A raw line as the parsers store it (no CR, invalid UTF-8 replaced, no ANSI escapes)."""
    return strip_ansi_text(raw.rstrip(b"\r").decode("utf-8", "replace"))


def nonblank_lines(data: bytes) -> list[tuple[int, bytes]]:
    """(byte offset, raw line) of every line holding more than whitespace — what must become a record.

    A final line without newline counts (the agent flushes it after ``idle_final``). Whitespace is
    the parsers' set (space, tab, CR, LF, FF, VT), which is exactly what ``bytes.strip`` removes.
    """
    out, start = [], 0
    for raw in data.split(b"\n"):
        if raw.strip():
            out.append((start, raw))
        start += len(raw) + 1
    return out


@dataclass
class Coverage:
    lines: int  # non-blank input lines
    records: int
    continuation_lines: int  # lines folded into the record before them
    parse_errors: int  # records whose attrs carry parse_error
    problems: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.problems and self.records + self.continuation_lines == self.lines


def check(data: bytes, records: pa.Table, max_problems: int = 10) -> Coverage:
    """Compare the records of one source (columns offset, msg, exc, format, attrs) with its bytes."""
    lines = nonblank_lines(data)
    starts = [offset for offset, _ in lines]
    by_start = dict(lines)
    rows = sorted(records.select(["offset", "msg", "exc", "format", "attrs"]).to_pylist(), key=lambda r: r["offset"])
    problems: list[str] = []
    offsets = [row["offset"] for row in rows]
    if len(set(offsets)) != len(offsets):
        problems.append(f"{len(offsets) - len(set(offsets))} duplicated offsets")
    stray = sorted(set(offsets) - set(starts))
    if stray:
        problems.append(f"records at offsets that start no line: {stray[:5]}")
    parse_errors = 0
    for row in rows:
        attrs = json.loads(row["attrs"]) if row["attrs"] else {}
        if "parse_error" in attrs:
            parse_errors += 1
            raw = by_start.get(row["offset"])
            if row["format"] != "text":  # parsed, with values its fields cannot hold: each kept in attrs
                named = str(attrs["parse_error"]).removeprefix("unusable value in: ").split(", ")
                if not str(attrs["parse_error"]).startswith("unusable value in: ") or any(n not in attrs for n in named):
                    problems.append(f"offset {row['offset']}: {attrs['parse_error']!r} without the values in attrs")
            elif raw is not None and row["msg"] != decoded(raw):
                problems.append(f"offset {row['offset']}: text record keeps {len(row['msg'])} of "
                                f"{len(decoded(raw))} characters of its line")
    continuation = 0
    record_starts = sorted(set(offsets))
    texts = {row["offset"]: f"{row['msg'] or ''}\n{row['exc'] or ''}" for row in rows}
    for offset, raw in lines:
        if offset in texts:
            continue
        owner_index = bisect.bisect_right(record_starts, offset) - 1
        if owner_index < 0:
            problems.append(f"line at offset {offset} precedes every record (skipped)")
        elif decoded(raw).strip() not in texts[record_starts[owner_index]]:
            problems.append(f"line at offset {offset} is in no record (not in the record at "
                            f"{record_starts[owner_index]})")
        else:
            continuation += 1
    return Coverage(len(lines), len(rows), continuation, parse_errors, problems[:max_problems])
