"""Multi-line grouping: which lines form one record (a traceback, an indented continuation).

Lines are classified in bulk (:class:`Kind`); this module walks the kinds and returns groups. Rules:

- A layout header (``2026-… INFO name: msg``) always starts a record; so does a marker line.
- An indented line continues the open record (in the message, or in the traceback once one began).
- ``Traceback (most recent call last):`` continues a WARNING-or-above header record that has no
  traceback yet (what ``logger.exception`` / ``exc_info=True`` write); anywhere else, e.g. after an
  INFO line, it starts its own record (an uncaught exception).
- Inside a traceback, the first non-indented line is the exception (``ValueError: …``); further
  non-indented lines continue its message until a blank line or a header; blank lines followed by
  ``During handling of the above exception…`` / ``The above exception was the direct cause…`` and a
  new ``Traceback`` keep chained exceptions in one record.
- Any other line starts a record of its own; a blank line closes the open record (blank lines carry
  no record; inside a traceback they are kept only when the traceback continues after them).
- Interleaved streams (``[default0]:`` / ``(WorkerDict pid=…)`` / ``[rank3]:`` prefixes) are grouped
  separately; a stream's open record also ends ``stream_window`` (1,000) lines after its last line.
- Interjections: a run of whole-line records of another writer (Ray's JSON lines, which the driver
  prints while Python writes a traceback line by line to the same console) stands in the text as one
  placeholder line. It is a record of its own; it ends an open record, except a traceback, which goes
  on after it — unless the run is longer than one forwarded batch (:data:`LONG_INTERJECTION`) — with a
  line that can only continue it (indented, a connector) or, when its last line was indented (a
  frame), with the exception line; a plain line after an exception line is not joined across it.
- Bounds: a record is split when it would exceed ``max_lines`` lines or ``max_bytes`` bytes; the
  head gets attrs ``multiline: "split"`` and the rest ``multiline: "continued"``.

A record is complete once a line that cannot belong to it has been seen (or at ``final``);
:func:`group_lines` returns the cut-off line before which everything is complete and self-contained,
which is what makes feeding a file in arbitrary chunks give exactly the records of one whole feed.
(One corner is not exact: when a record longer than the bounds is still open at the end of a call,
the rest re-offered later starts fresh and loses its ``continued`` mark; its lines are all kept.)

Speed: the line-by-line walk runs only on stretches that need it. Headers, markers and plain lines
outside a traceback are points where the walk's state is provably fresh; a stretch between two such
points that is a single line (plus blank lines) is a record without walking. Interleaved streams
are grouped the same way one stream at a time, a stream's silence of more than the window being
one more such point.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

DEFAULT_MAX_LINES = 2000
DEFAULT_MAX_BYTES = 1024 * 1024
DEFAULT_STREAM_WINDOW = 1000


INTERJECTION = "{"  # placeholder line of a run of another writer's lines, kept out of the text
LONG_INTERJECTION = "{{"  # ... of a run too long to sit inside a traceback: it ends one


class Kind(IntEnum):
    OTHER = 0
    HEADER = 1
    BLANK = 2
    INDENT = 3
    TRACEBACK = 4
    CONNECTOR = 5
    MARKER = 6
    HEADER_ERROR = 7  # a header at WARNING or above: the one a following traceback belongs to
    INTERJECTION = 8
    LONG_INTERJECTION = 9
    WARNING = 10  # Python's warnings line (``file.py:12: UserWarning: …``): a record whose message runs on
    KEYVALUE = 11  # a ``key: value`` / ``key:`` line or a closing bracket: may run on a block (a config dump)
    BANNER = 12  # a rule (``-----…``): opens a block of lines that the next rule closes
    LEAD = 13  # a plain line right before a ``Traceback`` line of its stream: a message logged with exc_info


class Block(IntEnum):
    """What a line's text says about the lines after it (``blocks``, per line)."""

    NONE = 0
    ITEMS = 1  # a ``key: value`` item: more items may follow (an object's fields, one a line)
    OPENS = 2  # ends with ``:``: the dump of what it names follows (a config, a module's repr)
    REST = 3  # a header with an empty message: the message is the lines after it, up to the next header


class _Tb(IntEnum):
    NONE = 0
    FRAMES = 1
    EXCEPTION = 2
    CONNECTOR = 3


@dataclass
class Group:
    """One record: its line indices and, per line, whether it belongs to msg ('m') or exc ('x')."""

    start: int
    header: bool
    lines: list[int] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    exception_lines: list[int] = field(default_factory=list)  # first line after each traceback's frames
    split: str | None = None  # "split" (head of an over-long record) or "continued"
    marker: bool = False
    nbytes: int = 0
    tb: _Tb = _Tb.NONE
    had_traceback: bool = False
    takes_traceback: bool = False
    blanks: list[int] = field(default_factory=list)
    interrupted: bool = False  # an interjection came after its last line
    block: int = Block.NONE  # what its last line says about the next ones (a header's message, an item)
    warning: bool = False  # a warning whose message has not ended yet (its indented source line ends it)
    banner: bool = False  # opened by a rule that a rule closes

    @property
    def last(self) -> int:
        return self.lines[-1]

    def shifted(self, lines: int) -> Group:
        """This record with its line indices `lines` further on (its read joined after others')."""
        return self.mapped(range(lines, lines + self.last_seen + 1))

    def mapped(self, to: Sequence[int]) -> Group:
        """This record with each line index i replaced by ``to[i]`` (a stream's lines among all)."""
        return dataclasses.replace(self, start=to[self.start], lines=[to[i] for i in self.lines],
                                   exception_lines=[to[i] for i in self.exception_lines],
                                   blanks=[to[i] for i in self.blanks])

    @property
    def last_seen(self) -> int:
        """The last line that belongs, or may belong, to this record (tentative blank lines too)."""
        return self.blanks[-1] if self.blanks else self.lines[-1]


@dataclass
class Grouping:
    """Complete records before `cut`: their first lines, and the details of those that are not a
    plain single line (keyed by first line). Plain single lines are the bulk and stay in numpy."""

    starts: np.ndarray  # int64, ascending
    multi: dict[int, Group]
    cut: int


_CONTINUATION = (Kind.INDENT, Kind.TRACEBACK, Kind.CONNECTOR)
_WHOLE = (Kind.BLANK, Kind.MARKER, Kind.INTERJECTION, Kind.LONG_INTERJECTION)  # no next line continues these
_STARTERS = (Kind.HEADER, Kind.HEADER_ERROR, Kind.MARKER, Kind.WARNING, Kind.LEAD)


def _table(kinds: tuple[Kind, ...]) -> np.ndarray:
    """kind → in `kinds`, as an array to index with a kinds array (np.isin costs ~20 µs a call on the
    few lines of a trickle's read; indexing, ~1)."""
    table = np.zeros(max(Kind) + 1, dtype=bool)
    table[list(kinds)] = True
    return table


_IS_CONTINUATION, _IS_STARTER, _IS_WHOLE = _table(_CONTINUATION), _table(_STARTERS), _table(_WHOLE)
_IS_FRESH_UNLESS_TRACEBACK = _table((Kind.OTHER, Kind.INTERJECTION, Kind.KEYVALUE))
_IS_INTERJECTION = _table((Kind.INTERJECTION, Kind.LONG_INTERJECTION))
_BLANK, _TRACEBACK, _LONG_INTERJECTION = int(Kind.BLANK), int(Kind.TRACEBACK), int(Kind.LONG_INTERJECTION)
_WARNING, _BANNER, _KEYVALUE = int(Kind.WARNING), int(Kind.BANNER), int(Kind.KEYVALUE)


def group_lines(kinds: np.ndarray, lengths: np.ndarray, streams: np.ndarray | Sequence[Hashable] | None, *, final: bool,
                max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES,
                stream_window: int = DEFAULT_STREAM_WINDOW, blocks: np.ndarray | None = None) -> Grouping:
    """Group lines into records (see the module docstring).

    With interleaved streams (`streams`: each line's, any hashable, or an integer array of stream
    codes), each stream's lines are grouped on their own, and a record also ends once
    `stream_window` lines have passed since its last line, so a stream that falls silent cannot
    hold back the lines of the others. The result is that of feeding every line in order to one
    walker with an open record per stream (tests/parse/test_grouping_oracle.py). `blocks`: per line, a
    :class:`Block` (of a header, what its message says).
    """
    n = len(kinds)
    if n == 0:
        return Grouping(np.zeros(0, dtype=np.int64), {}, 0)
    blocks = np.zeros(n, dtype=np.int8) if blocks is None else blocks
    if streams is None:
        breaks = _window_breaks(kinds, np.arange(n), stream_window) if _IS_INTERJECTION[kinds].any() else None
        found = _bulk(kinds, lengths, breaks, max_lines, max_bytes, blocks)
        return _combined([found.mapped(None)], [_Open(found, None, _ends(found.last_seen(), final, n, stream_window))], n)
    codes = streams if isinstance(streams, np.ndarray) else _stream_codes(streams)
    order = np.argsort(codes, kind="stable")  # each stream's lines together, in file order
    bounds = np.flatnonzero(np.diff(codes[order], prepend=-1, append=-1)).tolist()
    parts, opens = [], []
    for lo, hi in itertools.pairwise(bounds):
        lines = order[lo:hi]
        found = _bulk(kinds[lines], lengths[lines], _window_breaks(kinds[lines], lines, stream_window),
                      max_lines, max_bytes, blocks[lines])
        parts.append(found.mapped(lines))
        last = found.last_seen()
        opens.append(_Open(found, lines, _ends(None if last is None else int(lines[last]), final, n, stream_window)))
    return _combined(parts, opens, n)


def _ends(last_seen: int | None, final: bool, n: int, stream_window: int) -> bool:
    """Is the record open at the end of the read complete? Yes if none is, at the end of the file, or
    once more than `stream_window` lines (interjections, other streams) followed its last line — with
    or without prefixes: a traceback followed by a window of forwarded lines is not held back."""
    return last_seen is None or final or n - last_seen > stream_window


@dataclass
class _Bulk:
    """One stream's records: `starts` of the complete ones (and of a trailing single line), the
    multi-line ones' groups, and the walked record still open at the end (`pending`)."""

    starts: np.ndarray
    multi: dict[int, Group]
    pending: Group | None
    ends_open: bool  # the last line is a single-line record the next line may continue
    count: int

    def last_seen(self) -> int | None:
        """The last line of the record open at the end (None: none is)."""
        if self.pending is not None:
            return self.pending.last_seen
        return self.count - 1 if self.ends_open else None

    def mapped(self, lines: np.ndarray | None) -> tuple[np.ndarray, dict[int, Group]]:
        """Starts and multi-line groups with the stream's line numbers mapped to `lines` (None: all
        lines are the stream's)."""
        if lines is None:
            return self.starts, self.multi
        to = lines.tolist() if self.multi else []
        return lines[self.starts], {to[start]: group.mapped(to) for start, group in self.multi.items()}


@dataclass
class _Open:
    found: _Bulk
    lines: np.ndarray | None  # the stream's lines among all (None: every line)
    closed: bool  # the record open at the end is complete (final, or its stream fell silent)


def _combined(parts: list[tuple[np.ndarray, dict[int, Group]]], opens: list[_Open], n: int) -> Grouping:
    """Every stream's records, complete before the first still open one (or any record running past it)."""
    starts = [part[0] for part in parts]
    multi: dict[int, Group] = {}
    for _, groups in parts:
        multi.update(groups)
    cut = n
    for one in opens:
        pending = one.found.pending
        if one.closed and pending is not None:
            pending.blanks = []
            group = pending if one.lines is None else pending.mapped(one.lines.tolist())
            starts.append(np.array([group.start], dtype=np.int64))
            if _is_multi(group):
                multi[group.start] = group
        elif not one.closed:
            start = pending.start if pending is not None else one.found.count - 1
            cut = min(cut, start if one.lines is None else int(one.lines[start]))
    all_starts = np.sort(np.concatenate(starts)) if len(starts) > 1 else (starts[0] if starts else
                                                                           np.zeros(0, np.int64))
    while True:
        overlapping = [start for start, group in multi.items() if start < cut and group.last >= cut]
        if not overlapping:
            break
        cut = min(overlapping)
    keep = all_starts < cut
    return Grouping(all_starts[keep].astype(np.int64), {s: g for s, g in multi.items() if s < cut}, cut)


def _stream_codes(streams: Sequence[Hashable]) -> np.ndarray:
    """Each line's stream as a small integer."""
    ids: dict[Hashable, int] = {}
    return np.fromiter((ids.setdefault(stream, len(ids)) for stream in streams), dtype=np.int64, count=len(streams))


def _window_breaks(kinds: np.ndarray, lines: np.ndarray, window: int) -> np.ndarray:
    """The stream's lines that come more than `window` lines after its last line that an open record
    noted (an interjection does not: the record it interrupts stays as it was): an open record
    ends there."""
    noted = ~_IS_INTERJECTION[kinds]
    local = np.arange(len(kinds))
    before = np.maximum.accumulate(np.where(noted, local, -1))  # the last noted line at or before each
    previous = np.concatenate(([-1], before[:-1]))
    return (previous >= 0) & (lines - lines[np.maximum(previous, 0)] > window)


def _is_multi(group: Group) -> bool:
    """Not a plain single line: its details are kept (the plain ones are the bulk and stay in numpy)."""
    return len(group.lines) > 1 or group.roles[0] == "x" or bool(group.split)


def _bulk(kinds: np.ndarray, lengths: np.ndarray, breaks: np.ndarray | None, max_lines: int, max_bytes: int,
          blocks: np.ndarray) -> _Bulk:
    """One stream's lines grouped, an open record ending before each line of `breaks` (a mask).

    Lines where the walker's state is provably fresh: headers and markers always start a record; a
    plain line does too unless a traceback began earlier in its header's section (then it may be
    the exception line); so does a break. Runs between such boundaries are walked only when they
    hold more than one record's worth of lines; the rest are single-line records, decided in bulk.
    (A warning, or a line that opens a block, makes the plain lines after it in its section maybe
    its own, like a traceback does.)"""
    n = len(kinds)
    index = np.arange(n)
    fresh = _IS_STARTER[kinds] if breaks is None else _IS_STARTER[kinds] | breaks
    section_start = np.maximum.accumulate(np.where(fresh, index, 0))
    special = (kinds == _TRACEBACK) | (kinds == _WARNING) | (kinds == _BANNER) | ((blocks > 0) & _IS_STARTER[kinds])
    special |= (kinds == _KEYVALUE) & (blocks == Block.OPENS)  # a plain `name:` line opens a block too
    last_traceback = np.maximum.accumulate(np.where(special, index, -1))
    in_traceback = last_traceback >= section_start
    in_traceback &= ~fresh  # a header itself is fresh even right after a traceback
    boundary = fresh | (_IS_FRESH_UNLESS_TRACEBACK[kinds] & ~in_traceback)
    boundary |= kinds == _LONG_INTERJECTION
    boundary[0] = True
    bounds = np.flatnonzero(boundary)
    ends = np.append(bounds[1:], n)
    first_kind = kinds[bounds]
    # a run is trivial when its first line is no continuation and everything after it is blank
    nonblank_after = np.add.reduceat((kinds != _BLANK).astype(np.int64), bounds) - (first_kind != _BLANK)
    # (a warning or a block's head goes on after blank lines when its message or items do)
    trivial = (nonblank_after == 0) & ~_IS_CONTINUATION[first_kind] & ~special[bounds]
    starts: list[np.ndarray] = [bounds[trivial & (first_kind != _BLANK)]]
    multi: dict[int, Group] = {}
    pending: Group | None = None
    length_list = lengths.tolist() if (~trivial).any() else []
    block_list = blocks.tolist() if (~trivial).any() else []
    for lo, hi in zip(bounds[~trivial].tolist(), ends[~trivial].tolist(), strict=True):
        walker = _Walker(length_list, max_lines, max_bytes, n, block_list)
        for i, kind in zip(range(lo, hi), kinds[lo:hi].tolist(), strict=True):
            walker.feed(i, kind, "")
        if hi < n:
            walker.close("")  # the next boundary ends it
        pending = walker.open.get("")
        starts.append(np.array([group.start for group in walker.groups], dtype=np.int64))
        multi.update((g.start, g) for g in walker.groups if _is_multi(g))
    all_starts = starts[0] if len(starts) == 1 else np.sort(np.concatenate(starts))  # single lines only: in order
    ends_open = pending is None and len(all_starts) > 0 and all_starts[-1] == n - 1 and not _IS_WHOLE[kinds[n - 1]]
    return _Bulk(all_starts.astype(np.int64), multi, pending, bool(ends_open), n)


class _Walker:
    def __init__(self, lengths: list[int], max_lines: int, max_bytes: int, stream_window: int,
                 blocks: list[int] | None = None) -> None:
        self.lengths = lengths
        self.blocks = blocks
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self.stream_window = stream_window
        self.open: dict[str, Group] = {}
        self.groups: list[Group] = []
        self.last_kind: dict[str, int] = {}  # per stream, the kind of its last non-blank line

    def feed(self, i: int, kind: int, stream: str) -> None:
        group = self.open.get(stream)
        if group is not None and i - group.last_seen > self.stream_window:
            self.close(stream)
            group = None
        if kind == Kind.BLANK:
            if group is not None and (group.tb != _Tb.NONE or group.block or group.warning or group.banner):
                group.blanks.append(i)  # kept if the record goes on after it
            elif group is not None:
                self.close(stream)
            return
        if kind in (Kind.INTERJECTION, Kind.LONG_INTERJECTION):
            if group is not None and (group.tb == _Tb.NONE or kind == Kind.LONG_INTERJECTION):
                self.close(stream)
            elif group is not None:
                group.interrupted = True
            self.groups.append(Group(start=i, header=False, lines=[i], roles=["m"], nbytes=self.lengths[i]))
            return
        previous, self.last_kind[stream] = self.last_kind.get(stream), kind  # (blank lines returned above)
        if group is not None and group.interrupted:
            group.interrupted = False
            if not (kind in _CONTINUATION or (kind in (Kind.OTHER, Kind.KEYVALUE) and previous == Kind.INDENT)):
                self.close(stream)
                group = None
        if kind in (Kind.HEADER, Kind.HEADER_ERROR, Kind.MARKER):
            started = self._start(stream, i, header=kind != Kind.MARKER, marker=kind == Kind.MARKER)
            started.takes_traceback = kind == Kind.HEADER_ERROR
            if kind == Kind.MARKER:
                self.close(stream)
            else:
                started.block = self._block(i)
            return
        if kind == Kind.WARNING:
            self._start(stream, i, header=False).warning = True
            return
        if kind == Kind.LEAD:  # (not an exception message's next line: a new message and its traceback)
            self._start_plain(stream, i, kind)
            return
        if kind == Kind.BANNER and (group is None or group.tb == _Tb.NONE):  # (in a traceback: its message's)
            if group is not None and group.block == Block.REST:
                self._append(stream, group, i, "m")
            elif group is not None and group.banner:
                group = self._append(stream, group, i, "m")  # the rule that closes it
                group.banner, group.block = False, Block.NONE
            else:
                self._start(stream, i, header=False).banner = True
            return
        if group is not None and group.blanks and group.tb == _Tb.NONE and not (
                kind == Kind.INDENT or (kind == Kind.KEYVALUE and (group.block or group.warning))
                or ((group.banner or group.block == Block.REST) and kind in (Kind.OTHER, Kind.KEYVALUE))):
            self.close(stream)  # a block or a warning ends at a blank line that nothing of it follows
            group = None
        if group is None:
            new = self._start_plain(stream, i, kind)
            if kind == Kind.TRACEBACK:
                self._enter_traceback(new)
            return
        if kind == Kind.INDENT:
            group = self._append(stream, group, i, "x" if group.tb != _Tb.NONE else "m")
            group.warning = False  # (a warning's source line ends its message)
            if group.block == Block.OPENS:  # what it opened has begun
                group.block = Block.ITEMS
        elif kind == Kind.TRACEBACK:
            if group.tb == _Tb.CONNECTOR or (group.takes_traceback and not group.had_traceback and not group.split):
                group = self._append(stream, group, i, "x")
                self._enter_traceback(group)
            else:
                self._enter_traceback(self._start(stream, i, header=False))
        elif kind == Kind.CONNECTOR and group.tb in (_Tb.FRAMES, _Tb.EXCEPTION):
            group = self._append(stream, group, i, "x")
            group.tb = _Tb.CONNECTOR
        elif kind != Kind.CONNECTOR and (group.tb == _Tb.FRAMES or (group.tb == _Tb.EXCEPTION and not group.blanks)):
            was_frames = group.tb == _Tb.FRAMES
            group = self._append(stream, group, i, "x")
            if was_frames:
                group.exception_lines.append(i)
            group.tb = _Tb.EXCEPTION
        elif group.tb == _Tb.NONE and kind in (Kind.OTHER, Kind.KEYVALUE) and (
                group.warning or group.banner or group.block in (Block.OPENS, Block.REST)
                or (kind == Kind.KEYVALUE and group.block)):
            group = self._append(stream, group, i, "m")  # a warning's message, a block's item
            if group.block != Block.REST:
                group.block = self._block(i) or (Block.ITEMS if group.block else Block.NONE)
        else:
            self._start_plain(stream, i, kind)

    def _start_plain(self, stream: str, i: int, kind: int) -> Group:
        """A record starting with a line that is no header: a message-only logger's line takes the
        traceback right after it (its exc_info), and one ending in ':' opens what it names."""
        group = self._start(stream, i, header=False)
        if kind in (Kind.OTHER, Kind.KEYVALUE, Kind.LEAD):
            group.takes_traceback = True
            group.block = Block.OPENS if self._block(i) == Block.OPENS else Block.NONE
        return group

    def _block(self, i: int) -> int:
        return self.blocks[i] if self.blocks else Block.NONE

    @staticmethod
    def _enter_traceback(group: Group) -> None:
        group.tb = _Tb.FRAMES
        group.had_traceback = True
        if len(group.lines) == 1:
            group.roles[0] = "x"

    def _start(self, stream: str, i: int, *, header: bool, marker: bool = False) -> Group:
        self.close(stream)
        group = Group(start=i, header=header, marker=marker, lines=[i], roles=["m"], nbytes=self.lengths[i])
        self.open[stream] = group
        return group

    def close(self, stream: str) -> None:
        group = self.open.pop(stream, None)
        if group is not None:
            group.blanks = []
            self.groups.append(group)

    def _append(self, stream: str, group: Group, i: int, role: str) -> Group:
        pending = [*group.blanks, i]
        size = sum(self.lengths[j] + 1 for j in pending)
        if len(group.lines) + len(pending) > self.max_lines or group.nbytes + size > self.max_bytes:
            group.split = group.split or "split"
            tb, had = group.tb, group.had_traceback
            self.close(stream)
            group = Group(start=i, header=False, lines=[i], roles=[role], nbytes=self.lengths[i],
                          split="continued", tb=tb, had_traceback=had, block=group.block, warning=group.warning,
                          banner=group.banner)
            self.open[stream] = group
            return group
        group.lines.extend(pending)
        group.roles.extend([role] * len(pending))
        group.nbytes += size
        group.blanks = []
        return group
