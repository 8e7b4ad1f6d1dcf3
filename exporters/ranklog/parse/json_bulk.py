"""JSON lines in bulk: pyarrow's JSON reader on whole blocks, per-line Python only for the lines that fail.

The fast path hands a block of complete lines to ``pyarrow.json.read_json`` and converts the columns
it yields. A JSON file is seldom only JSON, and a line the reader rejects must cost its own line, not
its block's (bisecting the block read it ~log2(k) times over for k such lines, one reader call per
small block: one C++ warning in 100 lines cost 47 µs a line against 1.4 for clean JSON). So:

- lines that cannot be one JSON object (not ``{…}``: a library's warning, a ``print``, a line cut
  short) or nest deeper than the reader may be handed are set aside before it sees them;
- where the reader stops at a row (bad JSON inside ``{…}``, a value whose type differs from the rows
  before it), that line is set aside and the reader goes on after it (:meth:`_BlockReader._scan`);
- values a field cannot hold (a time that is none, a rank of 2.5), invalid UTF-8 the reader passes
  through and two objects on one line are pinned to their rows (:class:`_BadRows`), which are set
  aside, and the block is read once more without them; only a failure that cannot be pinned (a date
  past the reader's type) bisects.

Lines set aside take the line path: ``json.loads`` + ``record.normalize_row`` (wrong-typed fields end
up in ``attrs``), their times converted in one call; lines that are not JSON objects at all become
``text`` records with ``parse_error`` in ``attrs``. Records come out in line order whichever path
they took, and are those of each line parsed alone (tests/parse/test_json_failing_lines.py). Fields
that are not record fields go to ``attrs`` exactly as the line spelled them (re-read from the line's
own bytes, so the reader's type inference never alters them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from ranklog.record import INT32_FIELDS, INT64_FIELDS, NS_PER_TS, NUMBERED_TEXT_FIELDS, normalize_row, ts_array

from .ansi import strip_ansi_text
from .batch import build_batch, build_batch_many, concat, with_inferred_time
from .contract import ParseResult
from .joined import Finish, Read, finished, join_reads, max_line_bytes, unchanged
from .jsontext import join_members, json_member, note_unusable
from .levels import guess_levels, normalize_levels
from .lines import Lines, blank_mask, split_lines
from .timestamps import strings_to_timestamps, to_timestamps

if TYPE_CHECKING:
    from .contract import SourceContext

# Record field → JSON keys that may carry it, first present wins.
Mapping_ = Mapping[str, Sequence[str]]
# pyarrow's reader crashes the process on very deep nesting (~10,000 levels); lines with this many
# opening brackets are parsed by Python instead (which raises a clean RecursionError).
_MAX_OPEN_BRACKETS = 1000
_DENSE = 16  # a reader's failed try costs ~0.1 ms, the line path ~25 µs a line: see _BlockReader._scan
_WINDOW = 1024  # lines handed to the reader at a time after a failure
# a whole number after its key, as the line wrote it: an integer, or any JSON number (then with a point or exponent)
_WHOLE_INT = r"^[ \t\r\n]*-?(?:0|[1-9][0-9]*)[ \t\r\n]*[,}]"
_WHOLE_NUMBER = r"^[ \t\r\n]*-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?[ \t\r\n]*[,}]"
_ORDERS = 8  # key orders of one block joined column-wise (the lines of others take Python: each order costs a join)
_SMALL_BLOCK = 2  # up to this many lines, parsing line by line costs less than the JSON reader
# (measured, ranklog JSON: 1 / 2 / 5 / 8 lines 600 / 756 / 1,234 / 1,707 µs line by line, 845 / 960 / 930 / 967 µs
# with the reader; a trickle reads a few lines at a time)
_STRING_FIELDS = ("msg", "exc", "logger", "host", "ip", "job", "role", "trace_id")

# Turns the parsed extras of one line into the attrs dict (verl-jsonl renames `data` to `metrics`).
ExtrasHook = Callable[[dict[str, Any]], dict[str, Any]]


_TWO_OBJECTS = re.compile(rb"\}\s*\{")  # what a line the reader makes two rows of holds (or a string does)
_FAILED_ROW = re.compile(r" in row (\d+)$")  # the end of the reader's message for a row it rejects


class _Fallback(Exception):
    """This block cannot take the fast path as a whole."""


class _BadRows(_Fallback):
    """These rows of the block (a boolean mask) hold values the bulk conversion cannot take."""

    def __init__(self, rows: np.ndarray) -> None:
        super().__init__(int(rows.sum()))
        self.rows = rows


class _FailedAt(_Fallback):
    """The JSON reader stopped at this row of the block (its index among the block's lines)."""

    def __init__(self, row: int) -> None:
        super().__init__(row)
        self.row = row


def parse_json_lines(data: bytes, base_offset: int, ctx: SourceContext, *, final: bool, read_time_ns: int,
                     mapping: Mapping_, extras_hook: ExtrasHook | None = None, infer_time: bool = True) -> ParseResult:
    """Parse every complete JSON line of `data`; see the module docstring for the fallbacks.

    Missing times are inferred over the whole piece (not per block of the reader's bisection), so a
    line's time does not depend on which other lines failed the fast path."""
    lines = split_lines(data, final=final, max_line_bytes=max_line_bytes(ctx))
    keep = np.flatnonzero(~blank_mask(data, lines))
    reader = _BlockReader(data, lines, mapping, extras_hook, ctx.options.get("timezone", "UTC"))
    reader.read(keep)
    batch = reader.in_line_order(concat([build_batch(ctx, base_offset, lines.starts[idx], cols, read_time_ns,
                                                     infer_time=False) for idx, cols in reader.pieces]))
    if infer_time:
        batch = with_inferred_time(batch, ctx, read_time_ns)
    return ParseResult(batch=batch, consumed=lines.consumed, errors=reader.errors)


def parse_json_lines_many(reads: Sequence[Read], *, read_time_ns: int, mapping: Mapping_,
                          finish: Finish = unchanged) -> list[ParseResult]:
    """:func:`parse_json_lines` of several files' reads — (data, base_offset, ctx, final), one format and
    options — in one pass (:mod:`.joined`): their complete lines are read and built as one batch,
    each row with its own file's context (:func:`build_batch_many`); `finish` (the format's last
    step) runs on it, or on a read parsed alone. The results are those of parsing each read alone
    (tests/parse/test_parse_many.py)."""
    alone, joined, reads_joined = join_reads(reads)
    results: dict[int, ParseResult] = {}
    for i in alone:
        one = parse_json_lines(*reads[i][:3], final=reads[i][3], read_time_ns=read_time_ns, mapping=mapping)
        results[i] = finished(one, reads[i][2], finish)
    if reads_joined is not None:
        data, lines = reads_joined.data, reads_joined.lines
        keep = np.flatnonzero(~blank_mask(data, lines))
        reader = _BlockReader(data, lines, mapping, None, reads_joined.reads[0][2].options.get("timezone", "UTC"))
        reader.read(keep)
        count = len(joined)
        rows = np.bincount(reads_joined.owner[keep], minlength=count).tolist()
        batch = finish(reader.in_line_order(concat([build_batch_many(reads_joined.segments(idx), lines.starts[idx], cols)
                                                    for idx, cols in reader.pieces])), reads_joined.files(rows))
        errors = np.bincount(reads_joined.owner[np.asarray(reader.error_lines, dtype=np.int64)],
                             minlength=count).tolist()
        consumed = [split.consumed for split in reads_joined.splits]
        results.update(zip(joined, reads_joined.results(batch, rows, errors, consumed, read_time_ns), strict=True))
    return [results[i] for i in range(len(reads))]


class _BlockReader:
    """Bisecting reader: collects (line indices, columns) pieces in line order."""

    def __init__(self, data: bytes, lines: Lines, mapping: Mapping_, extras_hook: ExtrasHook | None,
                 tz: str) -> None:
        self.data = data
        self._buffer = pa.py_buffer(data)
        self._bytes = np.frombuffer(data, dtype=np.uint8)
        self.lines = lines
        self.mapping = {name: tuple(keys) for name, keys in mapping.items()}
        self.mapped_keys = frozenset(k for keys in self.mapping.values() for k in keys)
        self.extras_hook = extras_hook
        self.tz = tz
        self.pieces: list[tuple[np.ndarray, dict[str, pa.Array]]] = []
        self.errors = 0
        self.error_lines: list[int] = []  # the lines counted in `errors` (parse_json_lines_many splits them)
        self._rows: list[dict[str, Any]] = []  # the line path's rows, records or (at _objects) decoded objects
        self._objects: list[int] = []
        self._row_idx: list[int] = []

    def read(self, idx: np.ndarray) -> None:
        if len(idx) <= _SMALL_BLOCK:
            self._line_path(idx)
        else:
            shaped = self._object_shaped(idx)
            shaped[shaped] = ~self._too_deep(idx[shaped])
            self._line_path(idx[~shaped])
            self._scan(idx[shaped])
        self._flush_rows()

    def in_line_order(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """`batch` (the pieces' rows, piece after piece) with its rows in line order."""
        lines = np.concatenate([idx for idx, _ in self.pieces]) if self.pieces else np.zeros(0, np.int64)
        if (np.diff(lines) > 0).all():
            return batch
        return batch.take(pa.array(np.argsort(lines, kind="stable")))

    def _object_shaped(self, idx: np.ndarray) -> np.ndarray:
        """Lines that begin with ``{`` and end with ``}``: the only ones the reader is handed. It takes
        JSON objects only, and a block whose first line is ``null`` crashes the process (pyarrow 26);
        the others take the line path, which keeps a line that is not JSON as text with its error."""
        return (self._bytes[self.lines.starts[idx]] == 0x7B) & (self._bytes[self.lines.ends[idx] - 1] == 0x7D)

    def _scan(self, idx: np.ndarray) -> None:
        """Read `idx` in bulk; where the reader stops at a row (bad JSON, or a value whose type differs
        from the rows before it), that line takes the line path and the reader goes on after it. The
        lines left are then read again as one block, so every byte is handed to the reader about
        twice however many lines fail. After a failure the reader is handed `_WINDOW` lines at a
        time (a try costs ~0.1 ms more on a whole block), twice as many after each success; failures
        within `_DENSE` lines of each other send the lines up to the failure, and a run after it that
        doubles while they stay dense, to the line path: a try costs as much as several lines there."""
        kept: list[np.ndarray] = []
        start, window, skip = 0, len(idx), 0
        while start < len(idx):
            rest = idx[start:start + window]
            try:
                table = self._table(rest)
            except _FailedAt as failed:
                row = failed.row
                if row < _DENSE:
                    skip = min(max(2 * skip, _DENSE), _WINDOW)
                    taken = idx[start:start + row + 1 + skip]
                    self._line_path(taken)
                    start += len(taken)
                else:
                    skip = 0
                    kept.append(rest[:row])
                    self._line_path(rest[row:row + 1])
                    start += row + 1
                window = _WINDOW
                continue
            except _BadRows as bad:  # lines the reader cannot read right: the line path
                self._line_path(rest[bad.rows])
                kept.append(rest[~bad.rows])
            except _Fallback:  # rejected, no row named: bisected below, without a second read if alone
                if len(rest) == len(idx):
                    self._bisect(rest, rejected=True)
                    return
                kept.append(rest)
            else:
                if len(rest) == len(idx):
                    self._bisect(idx, table)
                    return
                kept.append(rest)
            start += len(rest)
            window, skip = 2 * window, 0
        if kept:
            self._bisect(np.concatenate(kept))

    def _bisect(self, idx: np.ndarray, table: pa.Table | None = None, rejected: bool = False) -> None:
        """Read `idx` (its reader's `table`, if read already; known to fail: `rejected`) in bulk, or in
        two parts the same way: split where the reader stopped (a column's type changed there), the
        rows a field cannot hold taken out, or in halves."""
        if len(idx) <= _SMALL_BLOCK:
            self._line_path(idx)
            return
        try:
            if rejected:
                raise _Fallback
            columns = self._columns(idx, self._table(idx) if table is None else table)
        except _BadRows as bad:  # those rows take the line path, the others are read again without them
            self._line_path(idx[bad.rows])
            self._bisect(idx[~bad.rows])
            return
        except _Fallback as failed:
            middle = failed.row if isinstance(failed, _FailedAt) and failed.row else len(idx) // 2
            self._bisect(idx[:middle])
            self._bisect(idx[middle:])
            return
        self._flush_rows()
        self.pieces.append((idx, columns))

    def _raw(self, i: int) -> bytes:
        return self.data[int(self.lines.starts[i]): int(self.lines.ends[i])]

    # -- fast path -------------------------------------------------------------------------------
    def _block(self, idx: np.ndarray) -> pa.Buffer:
        """The lines `idx` as one buffer: a view of the data where they follow each other, else their runs
        joined (so that the reader's row i is line idx[i])."""
        starts, ends = self.lines.starts, self.lines.ends
        if int(idx[-1]) - int(idx[0]) + 1 == len(idx):
            lo = int(starts[idx[0]])
            return self._buffer.slice(lo, int(ends[idx[-1]]) - lo)
        breaks = np.flatnonzero(np.diff(idx) != 1)
        firsts, lasts = idx[np.r_[0, breaks + 1]], idx[np.r_[breaks, len(idx) - 1]]
        return pa.py_buffer(b"\n".join(self.data[lo:hi] for lo, hi in zip(starts[firsts].tolist(),
                                                                          ends[lasts].tolist(), strict=True)))

    def _table(self, idx: np.ndarray) -> pa.Table:
        """The reader's table of the lines `idx`; :class:`_FailedAt` where it names the row it stopped at."""
        block = self._block(idx)  # (lines nested too deep for the reader are set aside in read())
        try:
            table = pa_json.read_json(
                pa.BufferReader(block),
                read_options=pa_json.ReadOptions(use_threads=False, block_size=block.size + 1),
                parse_options=pa_json.ParseOptions(newlines_in_values=False),
            )
        except pa.ArrowInvalid as exc:
            failed = _FAILED_ROW.search(str(exc))
            if failed is not None and int(failed.group(1)) < len(idx):
                raise _FailedAt(int(failed.group(1))) from exc
            raise _Fallback from exc
        except (pa.ArrowException, ValueError, UnicodeError, OverflowError) as exc:
            raise _Fallback from exc
        try:
            # the reader passes invalid UTF-8 inside a string value through unchecked (a level of
            # b"\xff" crashed the level mapping): such lines take the slow path, which replaces it
            # (~1.7 ms for an 8 MB block)
            table.validate(full=True)
        except (pa.ArrowException, ValueError) as exc:
            raise self._rows_where(idx, np.flatnonzero(self._bytes >= 0x80), _not_utf8) from exc
        if table.num_rows != len(idx):  # two objects on a line: the reader made two rows of it
            b = self._bytes
            raise self._rows_where(idx, np.flatnonzero((b[:-1] == 0x7D) & (b[1:] != 0x0A)), _TWO_OBJECTS.search)
        return table.combine_chunks()

    def _rows_where(self, idx: np.ndarray, hits: np.ndarray, test: Callable[[bytes], Any]) -> _Fallback:
        """:class:`_BadRows` for the lines of `idx` in which `test` finds something, tried (in Python,
        once a line) only on the lines holding one of the byte positions `hits`; a plain
        :class:`_Fallback` (bisection) if it finds nothing."""
        rows = np.zeros(len(idx), dtype=bool)
        if len(hits):
            holding = np.searchsorted(hits, self.lines.ends[idx]) > np.searchsorted(hits, self.lines.starts[idx])
            for k in np.flatnonzero(holding).tolist():
                rows[k] = bool(test(self._raw(int(idx[k]))))
        return _BadRows(rows) if rows.any() else _Fallback()

    def _columns(self, idx: np.ndarray, table: pa.Table) -> dict[str, pa.Array]:
        """The record columns of the reader's `table` of lines `idx`."""
        columns: dict[str, pa.Array] = {}
        used: dict[str, np.ndarray] = {}  # mapped key → the rows where it fills its field (:meth:`_winners`)
        bad = np.zeros(len(idx), dtype=bool)
        for name, keys in self.mapping.items():
            # (a key null in every row claims nothing: its null-typed column would not coalesce)
            present = [k for k in keys if k in table.column_names and not pa.types.is_null(table.column(k).type)]
            try:
                converted = [self._convert(name, table.column(k).chunk(0)) for k in present]
            except _BadRows as rows:  # every field's bad rows at once: one more read of the rest, not one a field
                bad |= rows.rows
                continue
            if len(converted) == 1:
                columns[name] = converted[0]
            elif converted:  # several keys claim the field: the first with a value fills it, the others go to attrs
                columns[name] = pc.coalesce(*converted)
                claimed = np.zeros(len(idx), dtype=bool)
                for key in present:
                    valid = np.asarray(table.column(key).is_valid())
                    used[key] = used.get(key, False) | (valid & ~claimed)
                    claimed |= valid
        if bad.any():
            raise _BadRows(bad)
        columns["attrs"] = self._attrs(idx, table, used)
        return columns

    def _too_deep(self, idx: np.ndarray) -> np.ndarray:
        """Which lines hold more opening brackets than pyarrow can safely nest? (Only a line of at
        least that many bytes can, so ordinary lines cost nothing here.)"""
        lengths = self.lines.ends[idx] - self.lines.starts[idx]
        deep = np.zeros(len(idx), dtype=bool)
        for k in np.flatnonzero(lengths >= _MAX_OPEN_BRACKETS).tolist():
            raw = self._raw(int(idx[k]))
            deep[k] = raw.count(b"[") + raw.count(b"{") >= _MAX_OPEN_BRACKETS
        return deep

    def _convert(self, name: str, column: pa.Array) -> pa.Array:
        """`column` (the reader's values of record field `name`) as the record column; :class:`_BadRows`
        for the rows whose values it cannot hold as such (a rank of 2.5 or "three", a time that is none):
        the line path keeps those values in attrs. Only a failure it cannot pin to rows (a date past
        what the reader's type holds) rejects the block."""
        kind = column.type
        if pa.types.is_null(kind):
            return column
        present = np.asarray(column.is_valid())
        if name == "ts":
            if not (pa.types.is_string(kind) or pa.types.is_timestamp(kind) or pa.types.is_integer(kind)
                    or pa.types.is_floating(kind)):
                raise _BadRows(present)
            try:
                converted = to_timestamps(column, self.tz)
            except pa.ArrowInvalid as exc:  # a date the ts type cannot hold (year 2999 as timestamp[s])
                raise _Fallback from exc
            if converted.null_count > column.null_count:  # a value that is not a time: keep it in attrs
                raise _BadRows(present & np.asarray(converted.is_null()))
            return converted
        if name == "level":
            if not (pa.types.is_string(kind) or pa.types.is_integer(kind)):
                raise _BadRows(present)
            return normalize_levels(column)
        if name in INT32_FIELDS or name in INT64_FIELDS:
            column = _whole_numbers(column, present)
            target = pa.int32() if name in INT32_FIELDS else pa.int64()
            try:
                return column.cast(target)
            except pa.ArrowInvalid as exc:  # past the field's range: those rows
                info = np.iinfo(np.int32 if name in INT32_FIELDS else np.int64)
                values = column.fill_null(0).to_numpy()
                outside = present & ((values < info.min) | (values > info.max))
                if not outside.any():
                    raise _Fallback from exc
                raise _BadRows(outside) from exc
        if name in NUMBERED_TEXT_FIELDS and pa.types.is_integer(kind):
            return column.cast(pa.string())
        if not pa.types.is_string(kind):
            raise _BadRows(present)
        return column

    def _attrs(self, idx: np.ndarray, table: pa.Table, used: dict[str, np.ndarray]) -> pa.Array:
        """attrs JSON per row: built column-wise for plain values, from the raw line otherwise. Only the
        rows that carry extra keys are touched (usually a minority). A mapped key is an extra key in
        the rows where another key filled its field (`used`: where it did, for keys with rivals):
        Ray's JSON lines carry both ``timestamp_ns`` and ``asctime``, and the loser of every line
        is built here too, not per line in Python (~25 µs a line)."""
        lost = {key: np.asarray(table.column(key).is_valid()) & ~rows for key, rows in used.items()}
        extra = [name for name in table.column_names if name not in self.mapped_keys or (name in lost and lost[name].any())]
        if not extra:
            return pa.nulls(len(idx), pa.string())
        valid = {name: lost[name] if name in lost else np.asarray(table.column(name).is_valid()) for name in extra}
        has_extra = np.logical_or.reduce([valid[name] for name in extra])
        rows = np.flatnonzero(has_extra)
        if not len(rows):
            return pa.nulls(len(idx), pa.string())
        taken = pa.array(rows)
        raw_rows = np.zeros(len(rows), dtype=bool)
        pieces: list[pa.Array] = []
        built: list[str] = []
        for name in extra:
            column = table.column(name).chunk(0).take(taken)
            if name in lost:  # its value where it lost only
                column = pc.if_else(pa.array(lost[name][rows]), column, pa.scalar(None, column.type))
            if self.extras_hook is not None or name == "attrs":
                piece = None
            else:
                spelled = self._whole_as_int(idx[rows], name, column) if pa.types.is_floating(column.type) else None
                piece = json_member(name, column, spelled)
            present = valid[name][rows]
            if piece is None:
                raw_rows |= present
            else:
                raw_rows |= present & np.asarray(piece.is_null())  # values only Python can spell exactly
                pieces.append(piece)
                built.append(name)
        attrs, unordered = self._joined_in_line_order(idx[rows], built, pieces, [valid[name][rows] for name in built])
        raw_rows |= unordered
        if raw_rows.any():
            values = attrs.to_pylist()
            for j in np.flatnonzero(raw_rows).tolist():
                values[j] = self._extras_json(json.loads(self._raw(int(idx[rows[j]])), strict=False))
            attrs = pa.array(values, pa.string())
        index = np.full(len(idx), -1, dtype=np.int64)
        index[rows] = np.arange(len(rows))
        return attrs.take(pa.array(index, mask=index < 0))

    def _whole_as_int(self, lines: np.ndarray, name: str, column: pa.Array) -> pa.Array | None:
        """For the doubles `column` of key `name` in `lines`: did each line write its whole number as an
        integer (True), with a point or an exponent (False), or is that not seen in its bytes (null:
        the row is left to Python)? The value is read after the key (:meth:`_key_after`). None when the
        column holds no whole number."""
        values = np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float64)
        rows = np.flatnonzero(np.isfinite(values) & (values == np.floor(values)))
        if not len(rows):
            return None
        starts = self.lines.starts[lines[rows]].astype(np.int64)
        ends = self.lines.ends[lines[rows]].astype(np.int64)
        after, seen = self._key_after(name, starts, ends)
        values_at = self._spans(np.where(seen, after, starts), ends[-1])  # from the value on
        as_int = np.asarray(pc.match_substring_regex(values_at, _WHOLE_INT), dtype=bool)
        as_number = np.asarray(pc.match_substring_regex(values_at, _WHOLE_NUMBER), dtype=bool)
        spelled, known = np.zeros(len(values), dtype=bool), np.zeros(len(values), dtype=bool)
        spelled[rows] = as_int
        known[rows] = seen & as_number
        return pa.array(spelled, mask=~known)

    def _key_after(self, key: str, at: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where ``"key":`` first ends after each of `at` (ascending, one a line, each line ending at
        `ends`), and whether it is there: within the line, and not after a backslash (inside a key
        such as ``"a\\"key"``). A string value cannot hold an unescaped quote, and lines with nested
        values take Python anyway, so a key found so is the key."""
        pattern = json.dumps(key, ensure_ascii=False) + ":"
        found = at + pc.find_substring(self._spans(at, ends[-1]), pattern).to_numpy(zero_copy_only=False)
        after = found + len(pattern.encode())
        hit = (found >= at) & (after <= ends)
        hit[hit] = self._bytes[found[hit] - 1] != 0x5C
        return after, hit

    def _spans(self, starts: np.ndarray, end: int) -> pa.Array:
        """The bytes from each of `starts` (ascending) to the next, the last to `end`, as one binary array
        over the block (no copy)."""
        return pa.Array.from_buffers(pa.large_binary(), len(starts), [None, pa.py_buffer(np.append(starts, end)), self._buffer])

    def _joined_in_line_order(self, lines: np.ndarray, names: list[str], pieces: list[pa.Array],
                              present: list[np.ndarray]) -> tuple[pa.Array, np.ndarray]:
        """The members `pieces` (of keys `names`, each where `present`) joined into one object per line
        of `lines` in the order the line writes its keys, as the line path writes them; and the lines
        left to Python (True). The reader orders its columns by first appearance in the block, so a
        line may write its keys in another order: an optional key first seen after a later one (Ray's
        ``actor_id`` in a block that began with task lines). Lines are grouped by the keys they carry
        (a logger writes a few sets); a group's order is its first line's, and each line of the
        group is checked to write its keys in that order (:meth:`_keys_in_order`). Lines that do not,
        and lines outside the `_ORDERS` largest groups, are left to Python."""
        if len(names) < 2:
            return join_members(pieces, len(lines)), np.zeros(len(lines), dtype=bool)
        here = np.column_stack(present)
        if here.all():  # one set of keys (the usual block): in column order unless a line says otherwise
            return join_members(pieces, len(lines)), ~self._keys_in_order(lines, names)
        # a line's set of keys packed into 64-bit words: np.unique(axis=0) over the boolean rows took 10× longer
        packed = np.packbits(here, axis=1)
        codes = np.ascontiguousarray(np.pad(packed, ((0, 0), (0, -packed.shape[1] % 8)))).view(np.uint64)
        _, first, group, sizes = np.unique(codes.view([("", np.uint64)] * codes.shape[1]).reshape(-1),
                                           return_index=True, return_inverse=True, return_counts=True)
        sets = here[first]
        kept = np.argsort(-sizes, kind="stable")[:_ORDERS]
        unsure = ~np.isin(group, kept)
        column_of = {name: j for j, name in enumerate(names)}
        parts, members = [np.flatnonzero(unsure)], [pa.nulls(int(unsure.sum()), pa.string())]
        for g in kept.tolist():
            rows = np.flatnonzero(group == g)
            order = np.flatnonzero(sets[g]).tolist()
            if len(order) > 1:
                written = json.loads(self._raw(int(lines[rows[0]])), strict=False)  # the group's first line
                order = [column_of[key] for key in written if key in column_of and sets[g][column_of[key]]]
                unsure[rows] = ~self._keys_in_order(lines[rows], [names[j] for j in order])
            taken = pa.array(rows)
            parts.append(rows)
            members.append(join_members([pieces[j].take(taken) for j in order], len(rows)))
        place = np.empty(len(lines), dtype=np.int64)
        place[np.concatenate(parts)] = np.arange(len(lines))
        return pa.concat_arrays(members).take(pa.array(place)), unsure

    def _keys_in_order(self, lines: np.ndarray, keys: list[str]) -> np.ndarray:
        """Which of `lines` write the keys `keys` in this order? Each key is looked for
        (:meth:`_key_after`) after the one before it, so the lines are searched about once whatever the
        number of keys; one not found so (spaced before its colon, escaped otherwise) is not in order."""
        ends = self.lines.ends[lines].astype(np.int64)
        at = self.lines.starts[lines].astype(np.int64)  # where the search for the next key starts
        ordered = np.ones(len(lines), dtype=bool)
        for key in keys:
            after, hit = self._key_after(key, at, ends)
            ordered &= hit
            at = np.where(ordered, after, at)
        return ordered

    def _winners(self, obj: dict[str, Any]) -> dict[str, str]:
        """Record field → the key of `obj` that fills it (the first mapped key with a value)."""
        winners: dict[str, str] = {}
        for name, keys in self.mapping.items():
            for key in keys:
                if obj.get(key) is not None:
                    winners[name] = key
                    break
        return winners

    def _extras_json(self, obj: dict[str, Any]) -> str | None:
        used = set(self._winners(obj).values())
        extras = {k: v for k, v in obj.items() if k not in used and v is not None}
        nested = extras.pop("attrs", None) if "attrs" not in self.mapping else None
        if isinstance(nested, dict):
            extras = {**nested, **extras}
        elif nested is not None:
            extras["attrs"] = nested
        if self.extras_hook is not None:
            extras = self.extras_hook(extras)
        return json.dumps(extras, ensure_ascii=False, separators=(",", ":"), default=str) if extras else None

    # -- slow path -------------------------------------------------------------------------------
    def _line_path(self, lines: np.ndarray) -> None:
        for i in lines.tolist():
            self._one_line(i)

    def _one_line(self, i: int) -> None:
        """Line `i` on the line path: decoded here, mapped to its record in :meth:`_flush_rows` with
        the other lines waiting there (their times converted in one call: one at a time it cost
        ~100 µs a line, most of the line path)."""
        text = self._raw(i).decode("utf-8", "replace")
        try:
            obj = json.loads(text, strict=False)  # raw control characters (NUL, tabs) are kept
            if not isinstance(obj, dict):
                raise ValueError(f"not a JSON object but {type(obj).__name__}")
        except (ValueError, RecursionError, TypeError, OverflowError) as exc:
            self._rows.append(self._text_row(i, text, exc))
        else:
            self._objects.append(len(self._rows))
            self._rows.append(obj)
        self._row_idx.append(i)

    def _text_row(self, i: int, text: str, exc: Exception) -> dict[str, Any]:
        """Line `i` kept as text, with the error that kept it out of JSON."""
        self.errors += 1
        self.error_lines.append(i)
        return {"msg": strip_ansi_text(text), "format": "text", "level": None,
                "attrs": json.dumps({"parse_error": str(exc)[:300]}, separators=(",", ":"))}

    def _map_objects(self, rows: list[dict[str, Any]], idx: list[int]) -> None:
        """The decoded objects among `rows` (line `idx[k]` each) → their records, in place."""
        objects, self._objects = self._objects, []
        timed = [(k, key) for k in objects if isinstance(rows[k].get(key := self._winners(rows[k]).get("ts", "")), str)]
        times = dict(zip((k for k, _ in timed), _texts_to_ns([rows[k][key] for k, key in timed], self.tz), strict=True))
        for k in objects:
            before = self.errors
            try:
                rows[k] = self._mapped_row(rows[k], times.get(k))
            except (ValueError, RecursionError, TypeError, OverflowError) as exc:
                rows[k] = self._text_row(idx[k], self._raw(idx[k]).decode("utf-8", "replace"), exc)
            else:
                self.error_lines += [idx[k]] * (self.errors - before)

    def _mapped_row(self, obj: dict[str, Any], ts_ns: int | None) -> dict[str, Any]:
        """`obj`'s record; `ts_ns`: its time text converted (None: not a time)."""
        fields: dict[str, Any] = {}
        rejected: dict[str, Any] = {}
        for name, key in self._winners(obj).items():
            value = obj[key]
            if name == "ts" and isinstance(value, str):
                ns = ts_ns
                if ns is None:
                    rejected[key] = value
                    continue
                value = ns
            elif (name in INT32_FIELDS or name in INT64_FIELDS) and isinstance(value, float) and not value.is_integer():
                rejected[key] = value  # int() would silently truncate it
                continue
            fields[name] = value
        attrs = self._extras_json(obj)
        if rejected:
            attrs = json.dumps({**(json.loads(attrs) if attrs else {}), **rejected}, ensure_ascii=False,
                               separators=(",", ":"), default=str)
        row = normalize_row({**fields, "attrs": attrs})
        lost = sorted({*(name for name in fields if fields[name] is not None and row.get(name) is None),
                       *(name for name, key in self._winners(obj).items() if key in rejected)})
        if lost:  # a known field whose value it cannot hold: kept in attrs, noted, counted
            row["attrs"] = note_unusable(row["attrs"], lost)
            self.errors += 1
        if "level" not in fields:
            row["level"] = None
        return row

    def _flush_rows(self) -> None:
        if not self._rows:
            return
        rows, self._rows = self._rows, []
        lines, self._row_idx = self._row_idx, []
        self._map_objects(rows, lines)
        idx = np.asarray(lines, dtype=np.int64)
        columns: dict[str, pa.Array] = {}
        for name in ("level", "msg", "attrs", "format", *_STRING_FIELDS):
            columns[name] = pa.array([row.get(name) for row in rows], pa.string())
        for name in INT32_FIELDS:
            columns[name] = pa.array([row.get(name) for row in rows], pa.int32())
        for name in ("step", "seq"):
            columns[name] = pa.array([row.get(name) for row in rows], pa.int64())
        columns["ts"] = ts_array([row.get("ts") for row in rows])
        unparsed = pc.fill_null(pc.equal(columns["format"], "text"), False)
        if pc.any(unparsed).as_py():
            columns["level"] = pc.if_else(unparsed, guess_levels(columns["msg"]), columns["level"])
        self.pieces.append((idx, columns))



def _not_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _whole_numbers(column: pa.Array, present: np.ndarray) -> pa.Array:
    """An integer field's values as int64, as the line path's ``int()`` reads them: integers; numbers
    the reader made floats because a float stood beside them (whole, below 2**53, where a double is
    still exact); integers written as text (``"3"``: plain digits only — ``int()`` also takes
    ``" 3"`` or ``"3_000"``, which the line path is left to). :class:`_BadRows` for the others."""
    kind = column.type
    if pa.types.is_integer(kind):
        return column.cast(pa.int64())
    if pa.types.is_floating(kind):
        whole = pc.and_(pc.equal(pc.floor(column), column), pc.less(pc.abs(column), float(1 << 53)))
    elif pa.types.is_string(kind):
        whole = pc.match_substring_regex(column, r"^-?[0-9]{1,18}$")
    else:
        raise _BadRows(present)
    bad = present & ~np.asarray(pc.fill_null(whole, False))
    if bad.any():
        raise _BadRows(bad)
    return column.cast(pa.int64())


def _texts_to_ns(texts: list[str], tz: str) -> list[int | None]:
    """Timestamp texts, converted exactly as the bulk path does (nanoseconds, `tz` for naive times;
    None where a text is not a time)."""
    if not texts:
        return []
    values = strings_to_timestamps(pa.array(texts, pa.string()), tz).cast(pa.int64()).to_pylist()
    return [None if value is None else value * NS_PER_TS for value in values]
