"""Printed times of every syntax to timestamps, and the date a year-less or date-less time lacks.

A learned layout's time group says its syntax (:mod:`.inference.patterns`): ``ts`` (ISO with its
zone), ``_tsn`` (ISO without), ``_t_ymd`` / ``_t_mdy`` / ``_t_dmy`` / ``_t_mdy2`` / ``_t_dmy2`` (dates
in other orders, two-digit years taken as 20YY), ``_t_epoch`` (seconds or milliseconds), and the
partial ones: ``_t_md``, ``_t_glog``, ``_t_syslog`` (no year), ``_t_clock`` (no date).

A partial time is dated from its file: the nearest full timestamp before it (a line of another
layout, or the file's last time before this read, ``ctx.state``), else the first one after it, else
the file's modification time — which is when its last line was written, so no line is after it —
else the read time. Consecutive partial times run on from that anchor: a time earlier than the one
before it by more than half a period (half a year for a missing year, twelve hours for a missing
date) crossed into the next year or day, so a glog file written from December 31st into January 1st
keeps its order. Naive times (all but ``ts`` and epochs) are read in the writer's zone (``tz``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .timestamps import _epoch_to_timestamps, strings_to_timestamps

_DAY = 86_400 * 10**9
_YEAR = int(365.2425 * _DAY)
_REWRITES = {  # syntax → (pattern, replacement) to ISO text
    "_t_ymd": (r"^(\d{4})/(\d\d)/(\d\d)", r"\1-\2-\3"),
    "_t_mdy": (r"^(\d\d)/(\d\d)/(\d{4})", r"\3-\1-\2"),
    "_t_dmy": (r"^(\d\d)/(\d\d)/(\d{4})", r"\3-\2-\1"),
    "_t_mdy2": (r"^(\d\d)/(\d\d)/(\d\d)", r"20\3-\1-\2"),
    "_t_dmy2": (r"^(\d\d)/(\d\d)/(\d\d)", r"20\3-\2-\1"),
    "_t_glog": (r"^(\d\d)(\d\d) ", r"\1-\2 "),
}
_MONTHS = {name: i + 1 for i, name in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep",
                                                 "Oct", "Nov", "Dec"))}
YEARLESS = ("_t_md", "_t_glog", "_t_syslog")
TIME_GROUPS = frozenset({"ts", "_tsn", "_t_epoch", "_t_clock", *_REWRITES, *YEARLESS})


@dataclass
class Times:
    """A layout's time column: full timestamps (null where partial or missing), partial texts
    (``MM-DD HH:MM:SS.f`` without a year, ``HH:MM:SS.f`` without a date), and whether each time was
    read in an assumed zone."""

    ts: pa.Array
    yearless: pa.Array | None = None
    clock: pa.Array | None = None
    naive: bool = True


def read_times(group: str, text: pa.Array, tz: str) -> Times:
    """The time group `group`'s texts (see the module docstring)."""
    if group == "ts":
        return Times(strings_to_timestamps(text, tz), naive=False)
    if group == "_t_epoch":
        return Times(_epoch_to_timestamps(pc.cast(text, pa.float64())), naive=False)
    nulls = pa.nulls(len(text), pa.timestamp("us", tz="UTC"))
    if group == "_t_clock":
        return Times(nulls, clock=text)
    if group == "_t_syslog":
        return Times(nulls, yearless=pa.array([_syslog(value) for value in text.to_pylist()], pa.string()))
    if group in _REWRITES:
        pattern, replacement = _REWRITES[group]
        text = pc.replace_substring_regex(text, pattern, replacement)
    if group in YEARLESS:
        return Times(nulls, yearless=text)
    return Times(strings_to_timestamps(text, tz))


def _syslog(value: str | None) -> str | None:
    if not value:
        return None
    month, day, rest = value.split(None, 2)
    return f"{_MONTHS[month]:02d}-{int(day):02d} {rest}"


def date_partial_times(ts_ns: np.ndarray, known: np.ndarray, yearless: pa.Array | None, clock: pa.Array | None,
                       tz: str, before_ns: int | None, fallback_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """Times of one file's lines in order: `ts_ns` where `known`, the partial ones dated (see the
    module docstring). `before_ns`: the file's last time before these lines; `fallback_ns`: its
    modification time (or the read time). Returns (ns, known) with the dated rows known."""
    ts_ns, known = ts_ns.copy(), known.copy()
    for texts, period in ((yearless, _YEAR), (clock, _DAY)):
        if texts is None:
            continue
        rows = np.flatnonzero(np.asarray(texts.is_valid()) & ~known)
        if not len(rows):
            continue
        values = texts.take(pa.array(rows))
        dated = _date(values, rows, ts_ns, known, period, tz, before_ns, fallback_ns)
        ok = dated != np.iinfo(np.int64).min
        ts_ns[rows[ok]] = dated[ok]
        known[rows[ok]] = True
    return ts_ns, known


def _date(values: pa.Array, rows: np.ndarray, ts_ns: np.ndarray, known: np.ndarray, period: int, tz: str,
          before_ns: int | None, fallback_ns: int) -> np.ndarray:
    anchors = np.flatnonzero(known)
    first_anchor = int(ts_ns[anchors[0]]) if len(anchors) else before_ns if before_ns is not None else fallback_ns
    base = _Calendar(period, first_anchor, tz)
    guess = base.cast(values, np.zeros(len(rows), dtype=np.int64))
    nat = np.iinfo(np.int64).min
    # runs of partial rows between known ones; wraps within a run
    run = np.searchsorted(anchors, rows)  # known rows before each partial row
    start = np.concatenate(([True], run[1:] != run[:-1]))
    step = np.diff(guess, prepend=guess[:1])
    valid = guess != nat
    wrap = np.where(~start & valid, (step < -period // 2).astype(np.int64) - (step > period // 2), 0)
    total = np.cumsum(wrap)
    at_start = np.maximum.accumulate(np.where(start, np.arange(len(rows)), 0))
    k = total - total[at_start]
    adjusted = guess + k * period
    # each run's whole-period shift, from its anchor
    shift = np.zeros(len(rows), dtype=np.int64)
    run_ids, first = np.unique(run, return_index=True)
    last = np.append(first[1:], len(rows)) - 1
    for rid, lo, hi in zip(run_ids.tolist(), first.tolist(), last.tolist(), strict=True):
        if rid > 0:
            anchor, at, cap = int(ts_ns[anchors[rid - 1]]), lo, False
        elif before_ns is not None:
            anchor, at, cap = before_ns, lo, False
        elif rid < len(anchors):
            anchor, at, cap = int(ts_ns[anchors[rid]]), hi, True
        else:
            anchor, at, cap = fallback_ns, hi, True
        if adjusted[at] == nat:
            continue
        b = round((anchor - int(adjusted[at])) / period)
        if cap and adjusted[at] + b * period > anchor + _DAY:  # nothing after the time that comes after it
            b -= 1
        shift[lo:hi + 1] = b
    return base.cast(values, k + shift)


class _Calendar:
    """Partial texts made whole with a year (or a date) `offset` periods from the anchor's."""

    def __init__(self, period: int, anchor_ns: int, tz: str) -> None:
        self.period, self.tz = period, tz
        local = pc.local_timestamp(pa.array([anchor_ns], pa.timestamp("ns", tz=tz))) if tz.upper() != "UTC" else \
            pa.array([anchor_ns], pa.timestamp("ns"))
        day = np.asarray(local.cast(pa.int64()))[0] // _DAY
        self.day = np.datetime64(int(day), "D")
        self.year = int(str(self.day)[:4])

    def cast(self, values: pa.Array, offsets: np.ndarray) -> np.ndarray:
        if self.period == _YEAR:
            prefix = pa.array([f"{self.year + int(k):04d}-" for k in offsets.tolist()], pa.string())
        else:
            prefix = pa.array((self.day + offsets.astype("timedelta64[D]")).astype(str).tolist(), pa.string())
            prefix = pc.binary_join_element_wise(prefix, " ", "")
        text = pc.binary_join_element_wise(prefix, values, "")
        return ns_or_nat(strings_to_timestamps(text, self.tz))


def ns_or_nat(ts: pa.Array) -> np.ndarray:
    """A timestamp column as int64 nanoseconds, int64's minimum where null."""
    out = np.full(len(ts), np.iinfo(np.int64).min, dtype=np.int64)
    if len(ts):
        valid = np.asarray(ts.is_valid())
        values = np.asarray(ts.cast(pa.timestamp("ns", tz="UTC")).cast(pa.int64()).fill_null(0), dtype=np.int64)
        out[valid] = values[valid]
    return out
