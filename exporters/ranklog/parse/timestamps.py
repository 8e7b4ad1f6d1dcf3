"""Turning timestamp columns of any spelling into the record's `ts` type, vectorized with a safe fallback.

Parsing goes through nanoseconds (text with 9 fraction digits is common) and ends in
:func:`ranklog.record.ts_array`, which stores microseconds and nulls what is out of range.

Naive times (no zone in the text) are taken in `timezone` (default UTC: training clusters log in
UTC far more often than not, and a per-source `timezone` option fixes the rest). A value that does
not parse becomes null, and the batch builder fills the read time, so a bad timestamp never loses
the line.
"""

from __future__ import annotations

import re
from datetime import datetime
from datetime import timezone as dt_timezone
from functools import lru_cache
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..record import TS_TYPE, ts_array
from .arrowbytes import replace_byte, values_contain

_NS_UTC = pa.timestamp("ns", tz="UTC")


def to_timestamps(column: pa.Array, tz: str = "UTC") -> pa.Array:
    """Any column (ISO strings, epoch numbers, timestamps, nulls) as the `ts` type with nulls."""
    kind = column.type
    if pa.types.is_null(kind):
        return pa.nulls(len(column), TS_TYPE)
    if pa.types.is_timestamp(kind):
        if kind.tz is None and tz.upper() != "UTC":
            column = pc.assume_timezone(column, tz, ambiguous="earliest", nonexistent="earliest")
        return ts_array(column)
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        return _epoch_to_timestamps(column)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return strings_to_timestamps(column, tz)
    return pa.nulls(len(column), TS_TYPE)


def strings_to_timestamps(column: pa.Array, tz: str = "UTC") -> pa.Array:
    """ISO 8601 / RFC 3339 text (`T` or space, `.` or `,` before fractions, optional zone).

    Arrow's cast parses every value before it reports a failure, so a wrong guess costs a full pass:
    the first value decides which cast is tried (zoned or naive); a column it does not take whole is
    taken apart (:func:`_apart`). Naive UTC times need no zone arithmetic (the cast to a UTC type
    keeps the values).
    """
    text = column.cast(pa.string())
    if values_contain(text, b","):
        text = replace_byte(text, b",", b".")
    try:
        return (_zoned if _first_is_zoned(text) else _naive)(text, tz)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return _apart(text, tz)


# a time the nanosecond cast takes in bulk: a year well inside its range (1678-2261), and whether it is zoned
_BULK_YEAR = r"^\s*(?:1[7-9]\d\d|2[01]\d\d|22[0-5]\d)-"
ZONED_END = r"(?:[Zz]|[+-]\d\d:?\d\d)\s*$"


def _apart(text: pa.Array, tz: str) -> pa.Array:
    """A column neither cast takes whole: its zoned and its naive times each cast in bulk, and one by
    one in Python only the values neither takes (a year past the range, another spelling). One such
    value used to send every value of its column through Python: a year-2999 line among 8 MB of
    JSON cost the block ~4 µs a line instead of ~1.5."""
    usual = pc.fill_null(pc.match_substring_regex(text, _BULK_YEAR), False)
    zoned = pc.fill_null(pc.match_substring_regex(text, ZONED_END), False)
    rows, parts = [], []
    odd = ~np.asarray(usual, dtype=bool)
    for attempt, mask in ((_zoned, pc.and_(usual, zoned)), (_naive, pc.and_(usual, pc.invert(zoned)))):
        chosen = np.asarray(mask, dtype=bool)
        if not chosen.any():
            continue
        try:
            parts.append(attempt(text.filter(mask), tz))
            rows.append(np.flatnonzero(chosen))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            odd |= chosen
    zone = _zone(tz)
    rows.append(np.flatnonzero(odd))
    parts.append(ts_array([_parse_one(value, zone) for value in text.filter(pa.array(odd)).to_pylist()]))
    place = np.empty(len(text), dtype=np.int64)
    place[np.concatenate(rows)] = np.arange(len(text))
    return pa.concat_arrays(parts).take(pa.array(place))


def _zoned(text: pa.Array, tz: str) -> pa.Array:
    return ts_array(text.cast(_NS_UTC))


def _naive(text: pa.Array, tz: str) -> pa.Array:
    naive = text.cast(pa.timestamp("ns"))
    if tz.upper() == "UTC":
        return ts_array(naive)
    return ts_array(pc.assume_timezone(naive, tz, ambiguous="earliest", nonexistent="earliest"))


def _first_is_zoned(text: pa.Array) -> bool:
    """Does the first non-null value end in a zone (`Z`, `+hh:mm`, `-hhmm`)?"""
    if text.null_count == len(text):
        return True
    first = (text if text.null_count == 0 else text.drop_null())[0].as_py().rstrip()
    return _ZONE_SUFFIX.search(first) is not None


_ZONE_SUFFIX = re.compile(r"(?:[Zz]|[+-]\d\d:?\d\d)$")


def _epoch_to_timestamps(column: pa.Array) -> pa.Array:
    """Epoch numbers; the magnitude tells the unit (s, ms, µs, ns), as in record.parse_ts."""
    nulls = np.asarray(column.is_null())
    if pa.types.is_integer(column.type):
        # integers stay integers: nanosecond epochs do not survive a trip through float64
        values = np.asarray(column.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
        magnitude = np.abs(values)
        scale = np.where(magnitude < 10**11, 10**9, np.where(magnitude < 10**14, 10**6,
                                                              np.where(magnitude < 10**17, 10**3, 1)))
        ok = magnitude < (2**63 - 1) // scale
        ns = np.where(ok, values, 0) * scale
        return ts_array(pa.array(ns, pa.int64(), mask=~ok | nulls))
    values = np.asarray(column.cast(pa.float64()).fill_null(0).to_numpy(zero_copy_only=False), dtype=np.float64)
    magnitude = np.abs(values)
    scale = np.where(magnitude < 1e11, 1e9, np.where(magnitude < 1e14, 1e6, np.where(magnitude < 1e17, 1e3, 1.0)))
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = values * scale
    ok = np.isfinite(scaled) & (np.abs(scaled) < 9.2e18)
    ns = np.where(ok, scaled, 0).astype(np.int64)
    return ts_array(pa.array(ns, pa.int64(), mask=~ok | nulls))


@lru_cache(maxsize=32)
def _zone(tz: str):
    return dt_timezone.utc if tz.upper() == "UTC" else ZoneInfo(tz)


def _parse_one(value: str | None, zone) -> int | None:
    if not value:
        return None
    try:
        dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=zone)
    ns = (int(dt.replace(microsecond=0).timestamp()) * 1_000_000 + dt.microsecond) * 1000
    return ns if -(2**63) < ns < 2**63 else None  # a real date the ts column cannot hold: not a usable time
