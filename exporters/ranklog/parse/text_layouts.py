"""The text engine behind every line-oriented format (python, ray, torchrun, verl-console, text, …).

A format is a :class:`TextFormat`: line prefixes to peel off (``[default0]:``, ``(WorkerDict pid=…)``,
``[rank3]:``), then layouts tried in order (RE2 regexes with named groups). Everything runs column-wise
on Arrow arrays: decoding, ANSI stripping, prefix and layout extraction (``pyarrow.compute.extract_regex``),
timestamp conversion, level normalisation. Python loops only where the data needs them: grouping of
multi-line records (:mod:`.multiline`, skipped entirely when a block has no continuation lines),
verl step lines, and attrs of the few rows that need merging.

Group names in layouts: record fields (``ts``, ``level``, ``msg``, ``logger``, ``pid``, ``rank``, …) fill
the record; ``_month``/``_day``/``_time`` build a glog timestamp (the year is the read time's);
``_kv`` holds ranklog-text ``k=v`` pairs; other names starting with ``_`` are scaffolding; every other
name goes to ``attrs`` (``file``, ``tid``, …).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ranklog.record import FIELDS, INT32_FIELDS, INT64_FIELDS, ts_array

from . import zones
from .arrowbytes import bytes_at, first_bytes, value_lengths
from .batch import build_batch, build_batch_many, empty_batch
from .contract import ParseResult
from .dating import TIME_GROUPS, date_partial_times, ns_or_nat, read_times
from .groups import extract_groups
from .inference import Lesson, learn, relearn, waits
from .inference.prefixes import ANY_LAUNCHER_PREFIX, LAUNCHER_PREFIXES, may_start_with_one
from .inference.vocabulary import LEVEL_WORD_SET
from .inferred_time import STATE_KEY as TS_STATE_KEY
from .inferred_time import mark_where
from .joined import Finish, Read, finished, join_reads, max_line_bytes, unchanged
from .jsontext import PARSE_ERROR_KEY, UNUSABLE_NOTE, count_unusable, join_members, json_member, unusable_members
from .levels import guess_levels, normalize_levels
from .lines import Lines, decode_lines, split_lines
from .multiline import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINES,
    INTERJECTION,
    LONG_INTERJECTION,
    Block,
    Group,
    Grouping,
    Kind,
    group_lines,
)
from .steps import extract_steps
from .timestamps import ZONED_END, strings_to_timestamps

if TYPE_CHECKING:
    from .contract import SourceContext

_CONNECTORS = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
_RAY_TASK_REPR = r"^ray::[\w.:\-]+\(\) \(pid=\d+"
_MARKER = r"^:(?P<_marker>actor_name|task_name|job_id):(?P<_name>\S.*)$"
MAX_WAIT_BYTES = 1 << 20  # a read this long never waits for more lines (nor holds a line cut for its length)
_LEVEL_SET = pa.array(sorted(LEVEL_WORD_SET), pa.string())  # the words a learned layout's level letters may spell
_ROW_FIELDS = frozenset(FIELDS) - {"source", "source_id", "offset", "format", "attrs"}
# rich's and loguru's tracebacks: a boxed "Traceback" head, box-drawn or `> File` frame lines
_BOXED_TRACEBACK = r"^[╭┏╔].*Traceback"
_BOXED_FRAME = r"^(?:[│┃║╰┗╚└]|> File )"
# Python's warnings (`file.py:12: UserWarning: message`, its message may run over lines, then the
# source line, indented)
_WARNING_LINE = r"^\S.*?:\d+: [A-Z]\w*Warning: "
# a rule that opens and closes a block of lines (`-----…`, `=====…`)
_BANNER_LINE = r"^(?:-{10,}|={10,}|\*{10,}|#{10,}|~{10,}|_{10,}|\+{10,})[ \t]*$"
# an item of a dumped object: `key: value`, `key:`, a closing bracket, or a `- item` of a list
_KEYVALUE_LINE = r"^(?:[A-Za-z_\[][\w\[\] .\-/()]{0,60}:(?:\s.*)?|[\])}]+[,;]?|[-*•] \S.*)$"


@dataclass(frozen=True)
class Layout:
    """A fixed line layout: an RE2 `pattern` with named groups (a user's regex, the ranklog logger's
    text layout); other layouts are learned per source (:mod:`.inference`)."""

    name: str
    pattern: str


@dataclass(frozen=True)
class TextFormat:
    layouts: tuple[Layout, ...]
    prefixes: tuple[str, ...] = ()  # RE2 patterns anchored at ^; their named groups are record fields
    markers: bool = False  # Ray `:actor_name:` / `:task_name:` / `:job_id:` lines set role / job after them
    kv_hook: Callable[[list[str | None]], list[dict[str, Any]]] | None = None  # parses the `_kv` group
    # a traceback after a header belongs to it at any level (the ranklog writer puts `exc` right
    # there); otherwise only WARNING-or-above headers take one (see multiline)
    traceback_follows_any_header: bool = False
    # lines `{` / `{{` stand for runs of another writer's lines the caller keeps out (see multiline)
    interjections: bool = False
    # learn each source's header layout from its lines (:mod:`.inference`), after `layouts`, and peel
    # the launchers' prefixes (:mod:`.inference.prefixes`) after `prefixes`
    learn: bool = False


def parse_text_lines(data: bytes, base_offset: int, ctx: SourceContext, *, final: bool, read_time_ns: int,
                     fmt: TextFormat, infer_time: bool = True) -> ParseResult:
    """Parse the complete records of `data` with `fmt` (see the module docstring)."""
    options = ctx.options
    if _waits(data, ctx, fmt, final=final):
        return ParseResult(empty_batch(), 0, 0)
    lines = split_lines(data, final=final, max_line_bytes=max_line_bytes(ctx))
    n = len(lines)
    if n == 0:
        return ParseResult(empty_batch(), lines.consumed, 0)
    marked = _mark(data, lines, fmt, [(0, n, ctx)], read_time_ns)
    grouping, consumed = _group(marked, 0, n, lines, final=final or lines.cut, options=options)  # a cut line ends what it is in
    if marked.lessons:
        marked.lessons[0].commit(ctx, grouping.cut)
    if not len(grouping.starts):
        return ParseResult(empty_batch(), consumed, 0)
    if lines.cut:
        last = int(grouping.starts[-1])
        cut_group = grouping.multi.get(last) or Group(start=last, header=bool(marked.header[last]), lines=[last],
                                                      roles=["m"])
        if cut_group.last == n - 1:
            cut_group.split = cut_group.split or "line_cut"
            grouping.multi[last] = cut_group
    columns = _records(grouping, marked.kinds, marked.body, marked.header_fields, marked.prefix_fields,
                       [(ctx, len(grouping.starts))])
    first = grouping.starts
    batch = build_batch(ctx, base_offset, lines.starts[first], columns, read_time_ns, infer_time=infer_time)
    return ParseResult(batch, consumed, count_unusable(batch.column("attrs")))


def parse_text_lines_many(reads: Sequence[Read], *, read_time_ns: int, fmt: TextFormat,
                          finish: Finish = unchanged) -> list[ParseResult]:
    """:func:`parse_text_lines` of several files' reads (one format and options) in one pass
    (:mod:`.joined`): prefixes, layouts and line kinds — the regex kernels, whose patterns RE2
    compiles at every call — run once over all their lines; lines are grouped into records per
    read (a record never spans two files, nor does a Ray error body), Ray's marker lines give role
    and job to the records after them in their own file (from its state on), and records are built
    as one batch, each with its own file's context; `finish` (the format's last step, such as Ray's
    ``[Rank N]`` messages) runs on the joined batch, or on a read parsed alone. The results are
    those of parsing each read alone (tests/parse/test_parse_many.py)."""
    waiting = [i for i, (data, _, ctx, final) in enumerate(reads) if _waits(data, ctx, fmt, final=final)]
    results: dict[int, ParseResult] = {i: ParseResult(empty_batch(), 0, 0) for i in waiting}
    others = [i for i in range(len(reads)) if i not in results]
    alone, joined, together = join_reads([reads[i] for i in others])
    alone, joined = [others[i] for i in alone], [others[i] for i in joined]
    for i in alone:
        one = parse_text_lines(*reads[i][:3], final=reads[i][3], read_time_ns=read_time_ns, fmt=fmt)
        results[i] = finished(one, reads[i][2], finish)
    if together is None:
        return [results[i] for i in range(len(reads))]
    ranges = together.line_ranges()
    read_ends = np.repeat([hi for _, hi in ranges], [hi - lo for lo, hi in ranges])
    marked = _mark(together.data, together.lines, fmt,
                   [(lo, hi, ctx) for (lo, hi), (_, _, ctx, _) in zip(ranges, together.reads, strict=True)],
                   read_time_ns, read_ends=read_ends)
    starts, multi, rows, consumed = [], {}, [], []
    for k, ((lo, hi), own, (_, _, ctx, final)) in enumerate(zip(ranges, together.splits, together.reads, strict=True)):
        if hi == lo:
            grouping, used = Grouping(np.zeros(0, dtype=np.int64), {}, 0), own.consumed
        else:
            grouping, used = _group(marked, lo, hi, own, final=final, options=ctx.options)
        if marked.lessons and hi > lo:
            marked.lessons[k].commit(ctx, grouping.cut, lo)
        starts.append(grouping.starts + lo)
        multi.update((start + lo, group.shifted(lo)) for start, group in grouping.multi.items())
        rows.append(len(grouping.starts))
        consumed.append(used)
    grouping = Grouping(np.concatenate(starts), multi, len(together.lines))
    if len(grouping.starts):
        files = together.files(rows)
        columns = _records(grouping, marked.kinds, marked.body, marked.header_fields, marked.prefix_fields, files)
        batch = finish(build_batch_many(together.segments(grouping.starts), together.lines.starts[grouping.starts],
                                        columns), files)
    else:
        batch = empty_batch()
    attrs = batch.column("attrs")
    ends = np.cumsum(rows).tolist()
    errors = [count_unusable(attrs.slice(end - count, count)) if count else 0 for end, count in zip(ends, rows, strict=True)]
    results.update(zip(joined, together.results(batch, rows, errors, consumed, read_time_ns), strict=True))
    return [results[i] for i in range(len(reads))]


def _waits(data: bytes, ctx: SourceContext, fmt: TextFormat, *, final: bool) -> bool:
    """A source's first lines wait for more to learn its layout from (:func:`.inference.waits`); not
    where other writers' lines stand in the text (Ray's JSON lines are parsed apart from it)."""
    return fmt.learn and not fmt.interjections and len(data) < MAX_WAIT_BYTES and waits(data, ctx, final=final)


@dataclass
class _Marked:
    """Every line's columns from the per-line kernels: what grouping and records need."""

    body: pa.Array  # the line without its prefixes
    prefix_fields: dict[str, pa.Array]
    streams: np.ndarray | None  # per line, a code of the prefixes it had (None: no line had one)
    prefixed: np.ndarray  # lines that had a prefix
    header_fields: dict[str, pa.Array]
    header: np.ndarray  # lines a layout matched
    kinds: np.ndarray
    lengths: np.ndarray
    lessons: list[Lesson]  # per read, what its source learned (formats that learn)
    blocks: np.ndarray  # per line, a multiline.Block (of a header, what its message says)


def _mark(data: bytes, lines: Lines, fmt: TextFormat, reads: list[tuple[int, int, SourceContext]], read_time_ns: int,
          read_ends: np.ndarray | None = None) -> _Marked:
    """`reads`: (first line, end line, ctx) of each read joined in `lines` (one format and options);
    `read_ends`: per line, the end of its read's lines when `lines` joins several reads."""
    tz = reads[0][2].options.get("timezone", "UTC")
    body = decode_lines(data, lines)
    prefixes = (*fmt.prefixes, *LAUNCHER_PREFIXES) if fmt.learn else fmt.prefixes
    prefix_fields, streams, prefixed, body = _peel_prefixes(body, prefixes, ANY_LAUNCHER_PREFIX if fmt.learn else None)
    fixed = tuple(layout.pattern for layout in fmt.layouts)
    repeats = np.zeros(len(body), dtype=bool)
    if not fmt.learn:
        header_fields, header = _match_layouts(body, fixed, fmt, tz, read_time_ns)
        lessons = []
    else:
        lessons = [learn(ctx, body, lo, hi) for lo, hi, ctx in reads]
        header_fields, header = _match_learned(body, reads, lessons, fixed, fmt, tz, read_time_ns)
        unmatched = ~header & (value_lengths(body) > 0)
        changed = [relearn(lesson, body, unmatched, lo, hi) for lesson, (lo, hi, _) in zip(lessons, reads, strict=True)]
        if any(changed):  # a new header shape: the lines are matched again with what was learned
            header_fields, header = _match_learned(body, reads, lessons, fixed, fmt, tz, read_time_ns)
        header_fields = _dated(header_fields, reads, read_time_ns)
        _drop_contradicted_ranks(header_fields, prefix_fields, read_ends)
        repeats = _repeated_headers(body, header, header_fields, read_ends)
        if repeats.any():  # a message's further lines under the same header: the message's lines
            header &= ~repeats
            body = pc.if_else(pa.array(repeats), header_fields["msg"], body)
    severity = None if fmt.traceback_follows_any_header else header_fields.get("level")
    kinds = _classify(body, header, severity, fmt.markers, every_header_takes_traceback=fmt.traceback_follows_any_header,
                      interjections=fmt.interjections, read_ends=read_ends)
    if fmt.learn and repeats.any():
        kinds[repeats & ~np.isin(kinds, (Kind.TRACEBACK, Kind.CONNECTOR))] = Kind.INDENT
    _mark_leads(kinds, streams, read_ends)
    blocks = _blocks(body, header, header_fields.get("msg"), kinds)
    return _Marked(body, prefix_fields, streams, prefixed, header_fields, header, kinds, lines.ends - lines.starts,
                   lessons, blocks)


def _drop_contradicted_ranks(fields: dict[str, pa.Array], prefix_fields: dict[str, pa.Array],
                             read_ends: np.ndarray | None) -> None:
    """A layout's rank field that one file shows beside two local ranks of its launcher's prefixes
    (``[default0]:``, ``[default1]:`` … all saying ``[RANK 0]``) names no process: one process has
    one local rank, so the value is something else (a library's own index that never left 0) and is
    dropped there; the message keeps the text."""
    rank, local = fields.get("rank"), prefix_fields.get("local_rank")
    if rank is None or local is None:
        return
    ranks = np.asarray(pc.fill_null(pc.cast(rank, pa.int64(), safe=False), -1))
    locals_ = np.asarray(pc.fill_null(pc.cast(local, pa.int64(), safe=False), -1))
    reads = np.zeros(len(ranks), dtype=np.int64) if read_ends is None else read_ends.astype(np.int64)
    both = (ranks >= 0) & (locals_ >= 0)
    if not both.any():
        return
    pairs = np.unique(np.stack([reads[both], ranks[both], locals_[both]], axis=1), axis=0)
    keys, counts = np.unique(pairs[:, :2], axis=0, return_counts=True)
    bad = keys[counts > 1]
    if not len(bad):
        return
    wrong = (ranks >= 0) & (np.isin(reads * (1 << 32) + ranks, bad[:, 0] * (1 << 32) + bad[:, 1]))
    fields["rank"] = pc.if_else(pa.array(wrong), pa.scalar(None, rank.type), rank)


def _repeated_headers(body: pa.Array, header: np.ndarray, fields: dict[str, pa.Array],
                      read_ends: np.ndarray | None = None) -> np.ndarray:
    """Header lines that repeat the header of the line before them, with a message that can only go on
    the one before (blank, indented, a traceback's or a dumped object's line): torch's glog formatter
    writes its header in front of every line of a multi-line message. (A new record under the same
    header — the same time, pid and code line — starts like a message does; a read's first line
    repeats nothing of another file's read joined before it.)"""
    repeats = np.zeros(len(body), dtype=bool)
    msg, ts = fields.get("msg"), fields.get("ts")
    if msg is None or ts is None or len(body) < 2:
        return repeats
    values = ns_or_nat(ts)
    same = header[1:] & header[:-1] & (values[1:] == values[:-1])
    if read_ends is not None:
        same &= read_ends[1:] == read_ends[:-1]
    rows = np.flatnonzero(same) + 1
    if not len(rows):
        return repeats
    texts, messages = body.take(pa.array(rows)).to_pylist(), msg.take(pa.array(rows)).to_pylist()
    before, before_messages = body.take(pa.array(rows - 1)).to_pylist(), msg.take(pa.array(rows - 1)).to_pylist()
    for k, (text, message, prev, prev_message) in enumerate(zip(texts, messages, before, before_messages, strict=True)):
        own = text[:len(text) - len(message or "")]
        if own == prev[:len(prev) - len(prev_message or "")] and _goes_on(message or "", prev_message or ""):
            repeats[rows[k]] = True
    return repeats


_ITEM = re.compile(_KEYVALUE_LINE)


def _goes_on(message: str, before: str) -> bool:
    """Can `message` only be the next line of `before`'s message? Blank or indented (a frame, an
    item), a traceback's head, an exception after a frame, an item after an indented one or a
    ``key:``. (Two ``key: value`` messages in the same millisecond are two records.)"""
    if not message or message[0] in " \t" or message.startswith("Traceback (most recent call last):"):
        return True
    if not before or before[0] in " \t" or before.rstrip().endswith(":"):
        return _ITEM.match(message) is not None
    return False


def _match_learned(body: pa.Array, reads: list[tuple[int, int, SourceContext]], lessons: list[Lesson],
                   fixed: tuple[str, ...], fmt: TextFormat, tz: str, read_time_ns: int
                   ) -> tuple[dict[str, pa.Array], np.ndarray]:
    """:func:`_match_layouts` of each read's lines with its source's learned layouts (after the fixed
    ones): reads that learned the same (a job's ranks log alike) in one pass."""
    by_patterns: dict[tuple[str, ...], list[int]] = {}
    for k, lesson in enumerate(lessons):
        by_patterns.setdefault(fixed + lesson.patterns(), []).append(k)
    if len(by_patterns) == 1:
        return _match_layouts(body, next(iter(by_patterns)), fmt, tz, read_time_ns)
    n = len(body)
    header = np.zeros(n, dtype=bool)
    parts: dict[str, list[tuple[np.ndarray, pa.Array]]] = {}
    for patterns, members in by_patterns.items():
        rows = np.concatenate([np.arange(reads[k][0], reads[k][1]) for k in members])
        fields, hit = _match_layouts(body.take(pa.array(rows)), patterns, fmt, tz, read_time_ns)
        header[rows] = hit
        for name, column in fields.items():
            parts.setdefault(name, []).append((rows, column))
    return {name: _scatter(pieces, n) for name, pieces in parts.items()}, header


def _dated(fields: dict[str, pa.Array], reads: list[tuple[int, int, SourceContext]], read_time_ns: int) -> dict[str, pa.Array]:
    """The header times with the partial ones (no year, no date) dated from each read's own file."""
    yearless, clock = fields.pop("_yearless", None), fields.pop("_clock", None)
    if yearless is None and clock is None:
        return fields
    n = len(yearless if yearless is not None else clock)
    ts = fields.get("ts")
    ts = pa.nulls(n, pa.timestamp("us", tz="UTC")) if ts is None else ts
    values, known = ns_or_nat(ts), np.asarray(ts.is_valid())
    for lo, hi, ctx in reads:
        own = slice(lo, hi)
        values[own], known[own] = date_partial_times(
            values[own], known[own], None if yearless is None else yearless.slice(lo, hi - lo),
            None if clock is None else clock.slice(lo, hi - lo), ctx.options.get("timezone", "UTC"),
            ctx.state.get(TS_STATE_KEY), ctx.mtime_ns or read_time_ns)
    fields["ts"] = ts_array(pa.array(values, pa.int64(), mask=~known))
    return fields


def _group(marked: _Marked, lo: int, hi: int, lines: Lines, *, final: bool, options: dict) -> tuple[Grouping, int]:
    """Records of one read's lines [lo, hi) of `marked` (`lines`: the read's own), and its bytes consumed."""
    prefixed = marked.streams is not None and marked.prefixed[lo:hi].any()  # as a parse of this read alone
    grouping = group_lines(
        marked.kinds[lo:hi], marked.lengths[lo:hi], marked.streams[lo:hi] if prefixed else None, final=final,
        max_lines=int(options.get("multiline_max_lines", DEFAULT_MAX_LINES)),
        max_bytes=int(options.get("multiline_max_bytes", DEFAULT_MAX_BYTES)), blocks=marked.blocks[lo:hi],
    )
    consumed = lines.consumed if grouping.cut >= hi - lo else int(lines.starts[grouping.cut])
    return grouping, consumed


# -- prefixes --------------------------------------------------------------------------------------
def _peel_prefixes(body: pa.Array, prefixes: tuple[str, ...], any_prefix: str | None = None
                   ) -> tuple[dict[str, pa.Array], np.ndarray | None, np.ndarray, pa.Array]:
    """Each prefix pattern, in order, peeled where it starts a line: its named groups as record fields
    (``_prefix_ts``: a time), the line's stream (its prefixes' texts, or their ``_key`` groups), the rest.
    `any_prefix`: one test for all of them, skipping every pattern when no line has one."""
    fields: dict[str, pa.Array] = {}
    stream: pa.Array | None = None
    prefixed = np.zeros(len(body), dtype=bool)
    if any_prefix is not None and prefixes:
        if any_prefix == ANY_LAUNCHER_PREFIX and not may_start_with_one(first_bytes(body), bytes_at(body, 10)):
            return fields, None, prefixed, body
        if not pc.any(pc.match_substring_regex(body, any_prefix)).as_py():
            return fields, None, prefixed, body
    for pattern in prefixes:
        # (the check leaves out the rest of the line: on a line it always matches, and without it RE2
        # stops at the prefix instead of reading every line to its end)
        if not pc.any(pc.match_substring_regex(body, f"^(?:{pattern.lstrip('^')})")).as_py():
            continue
        wrapped = f"^(?P<_prefix>{pattern.lstrip('^')})(?P<_rest>.*)$"
        found = extract_groups(body, wrapped)
        matched = found.is_valid()
        prefixed |= np.asarray(matched)
        names = [found.type.field(i).name for i in range(found.type.num_fields)]
        prefix_text = pc.if_else(matched, found.field("_key" if "_key" in names else "_prefix"), "")
        stream = prefix_text if stream is None else pc.binary_join_element_wise(stream, prefix_text, "")
        for name in names:
            if name.startswith("_") and name != "_prefix_ts":
                continue
            value = _blank_to_null(pc.if_else(matched, found.field(name), pa.scalar(None, pa.string())))
            if name == "_prefix_ts":
                name, value = "ts", strings_to_timestamps(value)
            fields[name] = value if name not in fields else pc.coalesce(fields[name], value)
        body = pc.if_else(matched, found.field("_rest"), body)
    codes = None if stream is None else np.asarray(stream.dictionary_encode().indices.to_numpy(zero_copy_only=False))
    return fields, codes, prefixed, body


# -- layouts ---------------------------------------------------------------------------------------
def _match_layouts(body: pa.Array, patterns: tuple[str, ...], fmt: TextFormat, tz: str,
                   read_time_ns: int) -> tuple[dict[str, pa.Array], np.ndarray]:
    """Record columns (full length, null where no layout matched) and the header mask.

    The first pattern extracts its groups from every line at once: a file's lines mostly share a
    layout, and formats list the common ones first. Each later pattern first only *tests* the lines
    left (``match_substring_regex``: no groups, ~0.1 µs a line) and extracts from those it matches:
    the lines that reach it mostly match none (prints, a traceback's frames) or a layout further
    down, and extracting on them cost ~1 µs a line and pattern (the layout matching of Ray's
    workers' and torchrun's rank files, real runs' output, 2× faster)."""
    n = len(body)
    remaining = np.ones(n, dtype=bool)
    parts: dict[str, list[tuple[np.ndarray, pa.Array]]] = {}
    for k, pattern in enumerate(patterns):
        rows = np.flatnonzero(remaining)
        if not len(rows):
            break
        subset = body if len(rows) == n else body.take(pa.array(rows))
        if k == 0:
            found = extract_groups(subset, pattern)
            valid = np.asarray(found.is_valid())
            hit = pa.array(valid)
        else:
            hit = pc.match_substring_regex(subset, pattern)
            valid = np.asarray(hit)
            found = None
        if not valid.any():
            continue
        hit_rows = rows[valid]
        every = len(hit_rows) == len(subset)
        if found is None:
            found = extract_groups(subset if every else subset.filter(hit), pattern)
        elif not every:
            found = found.filter(hit)
        if "(?P<level>[A-Z]" in pattern or "(?P<level>[a-z]" in pattern:  # a learned level: its letters
            words = np.asarray(pc.fill_null(pc.is_in(pc.utf8_upper(found.field("level")), value_set=_LEVEL_SET), False))
            if not words.all():  # (not a level word: no header of this layout)
                hit_rows, found = hit_rows[words], found.filter(pa.array(words))
                if not len(hit_rows):
                    continue
        for name, column in _layout_columns(found, fmt, tz, read_time_ns).items():
            parts.setdefault(name, []).append((hit_rows, column))
        remaining[hit_rows] = False
    columns = {name: _scatter(pieces, n) for name, pieces in parts.items()}
    return columns, ~remaining


def _layout_columns(found: pa.StructArray, fmt: TextFormat, tz: str, read_time_ns: int) -> dict[str, pa.Array]:
    names = [found.type.field(i).name for i in range(found.type.num_fields)]
    raw = {name: _blank_to_null(found.field(name)) for name in names}
    out: dict[str, pa.Array] = {}
    if "_time" in raw:  # a fixed layout's glog time: month, day and time (the year is the read time's)
        year = str(datetime.fromtimestamp(read_time_ns / 1e9, tz=timezone.utc).year)
        raw["ts"] = pc.binary_join_element_wise(year, "-", raw["_month"], "-", raw["_day"], "T", raw["_time"], "")
    timed = [name for name in names if name in TIME_GROUPS] or (["ts"] if "ts" in raw else [])
    for name in timed:
        times = read_times(name, raw[name], tz)
        out["ts"] = times.ts
        if times.yearless is not None:
            out["_yearless"] = times.yearless
        if times.clock is not None:
            out["_clock"] = times.clock
        naive = times.naive
        if name == "ts":  # a fixed layout's ISO time may or may not carry its zone
            naive = pc.invert(pc.fill_null(pc.match_substring_regex(raw[name], ZONED_END), True))
        out["_naive"] = pa.repeat(pa.scalar(naive), len(found)) if isinstance(naive, bool) else naive
    if "level" in raw:
        out["level"] = normalize_levels(raw["level"])
    for name in ("logger", "host", "ip", "job", "role", "trace_id", "exc"):
        if name in raw:
            out[name] = raw[name]
    if "msg" in names:  # (an empty message is one: the header said it all)
        out["msg"] = found.field("msg")
    for name in (*INT32_FIELDS, *INT64_FIELDS):
        if name in raw and name != "offset":
            out[name] = _to_int(raw[name], pa.int32() if name in INT32_FIELDS else pa.int64())
    extra = [name for name in names if not name.startswith("_") and name not in _ROW_FIELDS]
    pieces = [json_member(name, raw[name]) for name in extra]
    unusable = unusable_members(raw, out)
    attrs = join_members([p for p in [*pieces, *unusable] if p is not None], len(found))
    if "_kv" in raw and fmt.kv_hook is not None:
        out.update(_kv_columns(raw["_kv"], attrs, fmt.kv_hook))
    elif extra or unusable:
        out["attrs"] = attrs
    return out


def _kv_columns(kv: pa.Array, attrs: pa.Array, hook: Callable[[list[str | None]], list[dict[str, Any]]]) -> dict[str, pa.Array]:
    parsed = hook(kv.to_pylist())
    base = attrs.to_pylist()
    out: dict[str, pa.Array] = {}
    for name in ("rank", "local_rank", "pid"):
        out[name] = pa.array([row.pop(name, None) for row in parsed], pa.int32())
    for name in ("step", "seq"):
        out[name] = pa.array([row.pop(name, None) for row in parsed], pa.int64())
    for name in ("job", "role", "trace_id", "host", "ip"):
        out[name] = pa.array([row.pop(name, None) for row in parsed], pa.string())
    merged = []
    for own, rest in zip(base, parsed, strict=True):
        values = {**(json.loads(own) if own else {}), **rest}
        merged.append(json.dumps(values, separators=(",", ":"), ensure_ascii=False) if values else None)
    out["attrs"] = pa.array(merged, pa.string())
    return out


def _scatter(pieces: list[tuple[np.ndarray, pa.Array]], n: int) -> pa.Array:
    """Full-length column from (row positions, values) pieces; null elsewhere."""
    if len(pieces) == 1 and len(pieces[0][0]) == n:  # one layout matched every row, in order
        return pieces[0][1]
    positions = np.concatenate([rows for rows, _ in pieces])
    values = pa.concat_arrays([col.cast(pieces[0][1].type) for _, col in pieces])
    index = np.full(n, -1, dtype=np.int64)
    index[positions] = np.arange(len(positions))
    return values.take(pa.array(index, mask=index < 0))


def _to_int(column: pa.Array, kind: pa.DataType) -> pa.Array:
    try:
        return column.cast(kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        limit = 1 << (kind.bit_width - 1)
        values = []
        for text in column.to_pylist():
            try:
                value = int(text) if text is not None else None
            except ValueError:
                value = None
            values.append(value if value is not None and -limit <= value < limit else None)
        return pa.array(values, kind)


def _blank_to_null(column: pa.Array) -> pa.Array:
    """extract_regex yields "" for optional groups that did not take part; that means absent. (Lengths
    from the offsets: a group is rarely empty, and then the column is returned as it is.)"""
    empty = value_lengths(column) == 0
    if not empty.any():
        return column
    return pc.if_else(pa.array(empty), pa.scalar(None, column.type), column)


# -- classification --------------------------------------------------------------------------------
def _classify(body: pa.Array, header: np.ndarray, level: pa.Array | None, markers: bool, *,
              every_header_takes_traceback: bool = False, interjections: bool = False,
              read_ends: np.ndarray | None = None) -> np.ndarray:
    kinds = np.full(len(body), Kind.OTHER, dtype=np.int8)
    rows = _unsettled(body, header, markers)
    texts = body if len(rows) == len(body) else body.take(pa.array(rows))

    def where(mask: pa.Array, null: bool = False) -> np.ndarray:
        full = np.zeros(len(body), dtype=bool)
        full[rows] = np.asarray(pc.fill_null(mask, null))
        return full

    trimmed = pc.utf8_rtrim_whitespace(texts)
    blank = where(pc.equal(trimmed, ""), True)
    kinds[where(pc.or_(pc.starts_with(texts, " "), pc.starts_with(texts, "\t"))) & ~blank] = Kind.INDENT
    kinds[where(pc.equal(trimmed, "Traceback (most recent call last):"))] = Kind.TRACEBACK
    kinds[where(pc.is_in(trimmed, pa.array(_CONNECTORS)))] = Kind.CONNECTOR
    if markers:
        kinds[where(pc.match_substring_regex(texts, _MARKER))] = Kind.MARKER
        _continue_ray_error_bodies(kinds, where(pc.match_substring_regex(texts, _RAY_TASK_REPR)) & ~header, read_ends)
    plain = ~header & (kinds == Kind.OTHER)
    kinds[where(pc.match_substring_regex(texts, _BOXED_TRACEBACK)) & plain] = Kind.TRACEBACK
    kinds[where(pc.match_substring_regex(texts, _BOXED_FRAME)) & plain] = Kind.INDENT
    kinds[where(pc.match_substring_regex(texts, _WARNING_LINE)) & plain] = Kind.WARNING
    kinds[where(pc.match_substring_regex(texts, _KEYVALUE_LINE)) & plain] = Kind.KEYVALUE
    kinds[where(pc.match_substring_regex(texts, _BANNER_LINE)) & plain] = Kind.BANNER
    kinds[header] = Kind.HEADER_ERROR if every_header_takes_traceback else Kind.HEADER
    if level is not None:
        severe = np.asarray(pc.fill_null(pc.is_in(level, pa.array(["WARNING", "ERROR", "CRITICAL"])), False))
        kinds[header & severe] = Kind.HEADER_ERROR
    kinds[blank] = Kind.BLANK
    if interjections:
        kinds[where(pc.equal(texts, INTERJECTION))] = Kind.INTERJECTION
        kinds[where(pc.equal(texts, LONG_INTERJECTION))] = Kind.LONG_INTERJECTION
    return kinds


def _mark_leads(kinds: np.ndarray, streams: np.ndarray | None, read_ends: np.ndarray | None) -> None:
    """Plain lines whose stream's next line (in the same read) starts a traceback become
    :attr:`Kind.LEAD`: a message logged with its exc_info, not an exception message going on. (Not a
    line right after an indented one or a traceback's: it may be the exception line that ends one,
    and a restarted worker's next traceback follows it.)"""
    candidates = np.flatnonzero(np.isin(kinds, (Kind.OTHER, Kind.KEYVALUE)))
    if not len(candidates) or not (kinds == Kind.TRACEBACK).any():
        return
    n = len(kinds)
    ends = np.full(n, n, dtype=np.int64) if read_ends is None else read_ends
    following, preceding = _stream_neighbours(candidates, streams, n)
    ok = (following < n) & (preceding >= 0)
    ok[ok] = ends[following[ok]] == ends[candidates[ok]]
    ok[ok] = kinds[following[ok]] == Kind.TRACEBACK
    before = np.full(len(candidates), False)
    has_before = preceding >= 0
    before[has_before] = (ends[preceding[has_before]] == ends[candidates[has_before]]) & np.isin(
        kinds[preceding[has_before]], (Kind.INDENT, Kind.TRACEBACK, Kind.CONNECTOR))
    first = (following < n) & ~has_before  # a read's or stream's first line
    first[first] = (ends[following[first]] == ends[candidates[first]]) & (kinds[following[first]] == Kind.TRACEBACK)
    kinds[candidates[(ok & ~before) | first]] = Kind.LEAD


def _stream_neighbours(rows: np.ndarray, streams: np.ndarray | None, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The next and the previous line of each of `rows` in its own stream (n / -1: none)."""
    if streams is None:
        return rows + 1, rows - 1
    order = np.argsort(streams, kind="stable")
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    out = []
    for step, missing in ((1, n), (-1, -1)):
        at = position[rows] + step
        inside = (at >= 0) & (at < n)
        neighbour = np.full(len(rows), missing, dtype=np.int64)
        other = order[at[inside]]
        neighbour[inside] = np.where(streams[other] == streams[rows[inside]], other, missing)
        out.append(neighbour)
    return out[0], out[1]


def _blocks(body: pa.Array, header: np.ndarray, header_msg: pa.Array | None, kinds: np.ndarray) -> np.ndarray:
    """Per line, a :class:`Block`: a ``key:`` / ``key: value`` line, or a header whose message is one
    (only headers a plain line follows need it: it may continue their message)."""
    blocks = np.zeros(len(body), dtype=np.int8)
    items = np.flatnonzero(kinds == Kind.KEYVALUE)
    followed = np.flatnonzero(header[:-1] & ~header[1:] & (kinds[1:] != Kind.BLANK))
    if header_msg is not None and len(followed):
        texts = header_msg.take(pa.array(followed))
        kv = np.asarray(pc.fill_null(pc.match_substring_regex(texts, _KEYVALUE_LINE), False))
        trimmed = pc.utf8_rtrim_whitespace(texts)
        opens = np.asarray(pc.fill_null(pc.ends_with(trimmed, ":"), False))
        empty = np.asarray(pc.fill_null(pc.equal(trimmed, ""), False))
        blocks[followed] = np.where(empty, Block.REST, np.where(opens, Block.OPENS, np.where(kv, Block.ITEMS, Block.NONE)))
    if len(items):
        texts = body.take(pa.array(items))
        opens = np.asarray(pc.fill_null(pc.ends_with(pc.utf8_rtrim_whitespace(texts), ":"), False))
        blocks[items] = np.where(opens, Block.OPENS, Block.ITEMS)
    return blocks


def _unsettled(body: pa.Array, header: np.ndarray, markers: bool) -> np.ndarray:
    """The lines whose kind the text kernels of _classify must decide. A header keeps its kind unless it
    is blank, and a blank line starts with whitespace (ASCII or not) or is empty, so a header starting
    with a visible ASCII character is settled — most lines of a logging file. With `markers`, every
    line: the Ray error-body walk reads the kinds of headers before they are set."""
    if markers:
        return np.arange(len(body))
    first = first_bytes(body)
    return np.flatnonzero(~header | (first <= 0x20) | (first >= 0x7F))


def _continue_ray_error_bodies(kinds: np.ndarray, task_lines: np.ndarray, read_ends: np.ndarray | None) -> None:
    """Ray prints a failed task's error under the line that announces it ("… Error: User exception:"
    then ``ray::f() (pid=…)``, the frames and ``ValueError: …`` without a ``Traceback`` line): the
    ``ray::`` line and the plain lines after it, up to a blank line or a header, continue the
    announcement, so a retry notice and the error it retries stay one record. (Up to the end of its
    read: `read_ends`, per line, when the lines join several files' reads.)"""
    for start in np.flatnonzero(task_lines).tolist():
        kinds[start] = Kind.INDENT
        end = start + 1
        limit = len(kinds) if read_ends is None else int(read_ends[start])
        while end < limit and kinds[end] in (Kind.OTHER, Kind.INDENT):
            kinds[end] = Kind.INDENT
            end += 1


# -- records ---------------------------------------------------------------------------------------
def _records(grouping: Grouping, kinds: np.ndarray, body: pa.Array, header_fields: dict[str, pa.Array],
             prefix_fields: dict[str, pa.Array], files: list[tuple[SourceContext, int]]) -> dict[str, pa.Array]:
    """Record columns of `grouping`'s records; `files`: (ctx, how many records) of each read, in order."""
    starts = grouping.starts
    first = pa.array(starts)
    columns: dict[str, pa.Array] = {name: col.take(first) for name, col in header_fields.items()}
    prefix_raw: dict[str, pa.Array] = {}
    for name, col in prefix_fields.items():
        taken = col.take(first)
        kind = pa.int32() if name in INT32_FIELDS else pa.int64() if name in INT64_FIELDS else pa.string()
        if kind != pa.string():
            prefix_raw[name], taken = taken, _to_int(taken, kind)
        columns[name] = pc.coalesce(columns[name], taken) if name in columns else taken
    unusable = unusable_members(prefix_raw, {name: columns[name] for name in prefix_raw})
    if unusable:  # e.g. [rank99999999999]: a rank no int32 holds
        noted = join_members(unusable, len(starts))
        base = columns["attrs"].to_pylist() if columns.get("attrs") is not None else [None] * len(starts)
        extra = {}
        for i, text in enumerate(noted.to_pylist()):
            if text is not None:
                extra[i] = more = json.loads(text)
                earlier = json.loads(base[i]).get(PARSE_ERROR_KEY, "") if base[i] else ""
                if earlier.startswith(UNUSABLE_NOTE):  # the layout's fields too: one note names all
                    more[PARSE_ERROR_KEY] += ", " + earlier.removeprefix(UNUSABLE_NOTE)
        columns["attrs"] = _merge_rows(columns.get("attrs"), extra, len(starts))
    msg = columns.get("msg")
    if msg is None or msg.null_count:  # lines no layout took are their own message
        msg = body.take(first) if msg is None else pc.coalesce(msg, body.take(first))
    start_kinds = kinds[starts]
    header = np.isin(start_kinds, (Kind.HEADER, Kind.HEADER_ERROR))
    exc = None
    extra_attrs: dict[int, dict[str, Any]] = {}
    traceback_only = np.zeros(len(starts), dtype=bool)
    if grouping.multi:
        positions = np.searchsorted(starts, np.fromiter(grouping.multi, dtype=np.int64, count=len(grouping.multi)))
        msg, exc, extra_attrs, traceback_only = _multiline_text(grouping, positions, body, header_fields.get("msg"),
                                                                 msg, header)
    columns["level"] = _levels(columns.get("level"), header, traceback_only, msg, exc)
    columns["msg"] = msg
    if exc is not None:
        columns["exc"] = exc
    markers = np.flatnonzero(start_kinds == Kind.MARKER)
    if len(markers) or any(ctx.state.get("role") is not None or ctx.state.get("job") is not None for ctx, _ in files):
        _apply_markers(markers, starts, body, columns, files)
    if extra_attrs:
        columns["attrs"] = _merge_rows(columns.get("attrs"), extra_attrs, len(starts))
    columns["step"], columns["attrs"] = extract_steps(msg, columns.get("step"), columns.get("attrs"))
    naive = columns.pop("_naive", None)
    if naive is not None:  # times read in the writer's zone, not stated by the line
        zone = files[0][0].options.get(zones.OPTION, "UTC")
        if pc.any(naive).as_py():
            columns["attrs"] = mark_where(columns.get("attrs"), naive, zones.ATTR, zone)
    return {name: col for name, col in columns.items() if col is not None}


def _levels(level: pa.Array | None, header: np.ndarray, traceback_only: np.ndarray, msg: pa.Array,
            exc: pa.Array | None = None) -> pa.Array:
    """The layout's level where it gave one; ERROR for bare tracebacks and for a message-only line
    with a traceback its words give no level to; a keyword guess for the rest (guessed only for the
    rows that need it: most lines of a logging file have a level)."""
    out = np.full(len(msg), None, dtype=object)
    known = np.zeros(len(msg), dtype=bool)
    if level is not None:
        known = header & np.asarray(level.is_valid())
        if known.all():  # the usual logging file: every record's header gave its level
            return level
        rows = np.flatnonzero(known)
        out[rows] = np.asarray(level.take(pa.array(rows)).to_numpy(zero_copy_only=False), dtype=object)
    out[traceback_only & ~known] = "ERROR"
    guess_rows = np.flatnonzero(~known & ~traceback_only)
    if len(guess_rows):
        out[guess_rows] = np.asarray(guess_levels(msg.take(pa.array(guess_rows))).to_numpy(zero_copy_only=False),
                                     dtype=object)
        if exc is not None:
            raised = np.asarray(exc.is_valid())[guess_rows] & (out[guess_rows] == "UNKNOWN")
            out[guess_rows[raised]] = "ERROR"
    return pa.array(out, pa.string())


def _multiline_text(grouping: Grouping, positions: np.ndarray, body: pa.Array, header_msg: pa.Array | None,
                    msg: pa.Array, header: np.ndarray):
    """msg/exc of the multi-line records (the others keep their single line), split marks, traceback flags."""
    groups = list(grouping.multi.values())
    needed = sorted({i for g in groups for i in g.lines})
    line_text = dict(zip(needed, body.take(pa.array(needed, pa.int64())).to_pylist(), strict=True))
    head_msgs = {}
    if header_msg is not None:
        heads = [g.start for g in groups if g.header]
        if heads:
            head_msgs = dict(zip(heads, header_msg.take(pa.array(heads, pa.int64())).to_pylist(), strict=True))
    n = len(msg)
    exc_values: list[str | None] = [None] * n
    extra: dict[int, dict[str, Any]] = {}
    traceback_only = np.zeros(n, dtype=bool)
    new_msgs = []
    for position, g in zip(positions.tolist(), groups, strict=True):
        head = head_msgs.get(g.start) if g.header else None
        head = line_text[g.start] if head is None else head
        msg_lines = [line_text[i] for i, role in zip(g.lines[1:], g.roles[1:], strict=True) if role == "m"]
        exc_lines = [line_text[i] for i, role in zip(g.lines, g.roles, strict=True) if role == "x"]
        if g.roles[0] == "x" and not header[position]:
            summary = [line_text[i] for i in g.exception_lines]
            head = summary[-1] if summary else head
            traceback_only[position] = True
        new_msgs.append("\n".join([head, *msg_lines]) if msg_lines else head)
        exc_values[position] = "\n".join(exc_lines) if exc_lines else None
        if g.split:
            extra[position] = {"line_cut": True} if g.split == "line_cut" else {"multiline": g.split}
    mask = np.zeros(n, dtype=bool)
    mask[positions] = True
    order = np.argsort(positions)
    replacements = pa.array([new_msgs[k] for k in order.tolist()], pa.string())
    msg = pc.replace_with_mask(msg, pa.array(mask), replacements)
    return msg, pa.array(exc_values, pa.string()), extra, traceback_only


def _apply_markers(markers: np.ndarray, starts: np.ndarray, body: pa.Array, columns: dict[str, pa.Array],
                   files: list[tuple[SourceContext, int]]) -> None:
    """Ray prints `:actor_name:X` / `:task_name:X` / `:job_id:J` before an actor's / task's output: the
    role (and job) of the lines that follow in its file, carried in ctx.state across calls and restarts.
    A record's value is its file's last such marker at or before it, else what the file carried in:
    one search over the markers, no Python per record or marker (a worker running many short tasks
    writes a marker before each one's output, half of the Ray scenarios' lines)."""
    found = pc.extract_regex(body.take(pa.array(starts[markers], pa.int64())), _MARKER)
    counts = np.array([count for _, count in files], dtype=np.int64)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    file_of = np.repeat(np.arange(len(files)), counts)  # a record's file
    for name, marker_names in (("role", ("actor_name", "task_name")), ("job", ("job_id",))):
        sets = pc.fill_null(pc.is_in(found.field("_marker"), pa.array(marker_names)), False)
        at = markers[np.asarray(sets, dtype=bool)]  # the records that set `name`, in order
        last = np.searchsorted(at, np.arange(bounds[-1]), side="right") - 1  # the last at or before each record
        own = last >= 0
        own[own] = at[last[own]] >= bounds[file_of[own]]  # ... in the record's own file
        # choices: what each file carried in, then each marker's name
        choices = pa.concat_arrays([pa.array([ctx.state.get(name) for ctx, _ in files], pa.string()),
                                    found.field("_name").filter(sets).cast(pa.string())])
        index = pa.array(np.where(own, len(files) + last, file_of))
        marked = choices.take(index)
        for f, (ctx, count) in enumerate(files):
            current = marked[bounds[f + 1] - 1].as_py() if count else ctx.state.get(name)
            if current is not None:
                ctx.state[name] = current
        if marked.null_count < len(marked):
            columns[name] = pc.coalesce(columns[name], marked) if name in columns else marked


def _merge_rows(attrs: pa.Array | None, extra: dict[int, dict[str, Any]], n: int) -> pa.Array:
    base = attrs.to_pylist() if attrs is not None else [None] * n
    for position, more in extra.items():
        own = base[position]
        base[position] = json.dumps({**(json.loads(own) if own else {}), **more}, separators=(",", ":"),
                                    ensure_ascii=False)
    return pa.array(base, pa.string())
