"""The request parameters of Loki's query endpoints: times, steps, limits, directions.

Times (``start``, ``end``, ``time``): an integer is Unix nanoseconds and a decimal number Unix
seconds (Loki's rules); RFC 3339 text; ``now``; or a relative age (``1h``, ``now-1h``, ``30m ago``) as
``ranklog query`` takes it. Durations (``step``, ``since``, ``interval``): Prometheus durations
(``5m``, ``1h30m``) or a number of seconds. A bad value is a 400 naming the parameter.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping

from ...errors import UserError
from ...query.filter_flags import parse_time
from ...query.logql.parser import parse_duration_ns

DEFAULT_LIMIT = 100
MAX_ENTRIES = 5000  # Loki's max_entries_limit_per_query default
MAX_POINTS = 11_000  # per series, as Prometheus and Loki cap a range query
QUERY_RANGE_DEFAULT_NS = 3600 * 10**9
# Times and durations the arithmetic of a query window can never overflow int64 with (time ± 2 durations).
MIN_TIME_NS, MAX_TIME_NS = -10**18, 7 * 10**18
MAX_DURATION_NS = 10**18
LABELS_RANGE_DEFAULT_NS = 6 * 3600 * 10**9


class BadParameter(UserError):
    """A query parameter Loki would refuse (400, plain text)."""


def time_param(params: Mapping[str, str], name: str, default: int, now_ns: int) -> int:
    text = (params.get(name) or "").strip()
    if not text:
        return default
    try:
        if re.fullmatch(r"-?\d+", text):
            value = int(text)
        elif re.fullmatch(r"-?\d+\.\d*", text):
            value = int(float(text) * 1e9)
        else:
            value = parse_time(text, now_ns, flag=name)
    except (UserError, ValueError, OverflowError):
        raise BadParameter(f'invalid parameter "{name}": cannot parse {text!r} to a valid timestamp') from None
    if not MIN_TIME_NS <= value <= MAX_TIME_NS:
        raise BadParameter(f'invalid parameter "{name}": {text!r} is outside the years 1938-2191 the archive answers for')
    return value


def duration_param(params: Mapping[str, str], name: str) -> int | None:
    """Nanoseconds, or None when the parameter is absent."""
    text = (params.get(name) or "").strip()
    if not text:
        return None
    try:
        value = int(float(text) * 1e9) if re.fullmatch(r"\d+(\.\d+)?", text) else parse_duration_ns(text)
    except (ValueError, OverflowError):
        value = -1
    if value <= 0 or value > MAX_DURATION_NS:
        raise BadParameter(f'invalid parameter "{name}": cannot parse {text!r} to a valid duration (at most 31 years)')
    return value


def time_range(params: Mapping[str, str], default_span_ns: int) -> tuple[int, int]:
    """(start, end) ns from ``start``/``end``/``since``; end defaults to now, start to end - since or
    end - `default_span_ns`."""
    now_ns = time.time_ns()
    end = time_param(params, "end", now_ns, now_ns)
    since = duration_param(params, "since")
    start = time_param(params, "start", end - (since or default_span_ns), now_ns)
    if end < start:
        raise BadParameter("invalid parameter: the query's end timestamp must not be before its start time")
    return start, end


def limit_param(params: Mapping[str, str]) -> int:
    text = (params.get("limit") or "").strip()
    if not text:
        return DEFAULT_LIMIT
    if not re.fullmatch(r"\d{1,12}", text):
        raise BadParameter(f'invalid parameter "limit": {text!r} is not a non-negative integer')
    limit = int(text)
    if limit > MAX_ENTRIES:
        raise BadParameter(f"max entries limit per query exceeded, limit > max_entries_limit_per_query "
                           f"({limit} > {MAX_ENTRIES})")
    return limit


def forward_param(params: Mapping[str, str]) -> bool:
    text = (params.get("direction") or "backward").strip().lower()
    if text not in ("forward", "backward"):
        raise BadParameter(f'invalid parameter "direction": {text!r} (forward or backward)')
    return text == "forward"


def step_param(params: Mapping[str, str], start: int, end: int) -> int:
    """The step (ns): given, or Loki's default of max(1 s, range / 250) whole seconds."""
    step = duration_param(params, "step")
    if step is None:
        step = max(1, (end - start) // 10**9 // 250) * 10**9
    if (end - start) // step + 1 > MAX_POINTS:
        raise BadParameter(f"exceeded maximum resolution of {MAX_POINTS} points per timeseries. "
                           "Try increasing the value of the step parameter")
    return step


def count_param(params: Mapping[str, str], names: tuple[str, ...], default: int, maximum: int) -> int:
    """A positive count under any of `names` (aliases), at most `maximum`."""
    for name in names:
        text = (params.get(name) or "").strip()
        if not text:
            continue
        if not re.fullmatch(r"\d{1,12}", text) or int(text) <= 0:
            raise BadParameter(f'invalid parameter "{name}": {text!r} is not a positive integer')
        return min(int(text), maximum)
    return default
