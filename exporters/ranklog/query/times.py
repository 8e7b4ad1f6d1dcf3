"""Times as people type them in every time flag (``--since``, ``--from/--start``, ``--until/--to/--end``),
and the zone times are shown and read in (``--tz``).

Accepted spellings (the union of what journalctl, logcli and kubectl users type):

- absolute: RFC 3339 / ISO 8601 (``2025-10-01T08:00:00Z``, ``2025-10-01 08:00:00``, ``2025-10-01``),
  epoch seconds (``1759305600``), ``now``;
- relative to now: a duration, compound allowed (``2h``, ``1h30m``, ``2d 12h``), optionally signed
  or spelled ``-1h``, ``1h30m ago``, ``now-1h30m``; ``+10m`` / ``now+10m`` reach into the future;
- calendar words: ``today``, ``yesterday``, ``tomorrow`` (midnight), optionally with a time of day
  (``yesterday 14:00``); a time of day alone (``08:00``, ``08:00:30``) is today at that time.

A time written without a zone (and the calendar words) is read in the display zone: UTC unless
``--tz`` (or ``$RANKLOG_TZ``) names another — ``local`` for this machine's zone, or an IANA name
such as ``Europe/Paris``. The same zone is used to show times (``2025-10-01T10:00:00.000000+02:00``);
with UTC they keep the archive's ``Z`` spelling, byte for byte what the logger wrote.
"""

from __future__ import annotations

import os
import re
import time
from datetime import datetime, timedelta, timezone, tzinfo

from ..errors import UserError
from ..record import format_ts
from ..units import parse_duration

TZ_ENV = "RANKLOG_TZ"
_WORDS = {"today": 0, "yesterday": -1, "tomorrow": 1}
_CLOCK = r"(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?"
_DAY_WORD = re.compile(rf"^(today|yesterday|tomorrow)(?:\s+{_CLOCK})?$", re.I)
_TIME_OF_DAY = re.compile(rf"^{_CLOCK}$")
_RELATIVE = re.compile(r"^(?:now\s*)?([-+])?\s*(\d[\w. ]*?)(\s+ago)?$", re.I)
_EXAMPLES = "e.g. '2025-10-01 08:00:00', RFC 3339, 2h, 1h30m ago, -30m, today, yesterday 14:00"


def zone(name: str | None = None) -> tzinfo:
    """The display zone: `name` (``UTC``, ``local``, an IANA name), else ``$RANKLOG_TZ``, else UTC."""
    name = (name if name is not None else os.environ.get(TZ_ENV, "")).strip()
    if not name or name.upper() in ("UTC", "Z"):
        return timezone.utc
    if name.lower() == "local":
        local = datetime.now().astimezone().tzinfo
        assert local is not None
        return local
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise UserError(f"bad --tz {name!r}: use UTC, local, or a zone name such as Europe/Paris") from None


def is_utc(tz: tzinfo) -> bool:
    return tz is timezone.utc


def _ns(dt: datetime) -> int:
    return (int(dt.replace(microsecond=0).timestamp()) * 1_000_000 + dt.microsecond) * 1000


def _at_clock(day: datetime, match: re.Match, first: int) -> datetime:
    hour, minute, second, fraction = match.group(first, first + 1, first + 2, first + 3)
    if hour is None:
        return day
    micro = int((fraction or "0").ljust(6, "0")[:6])
    return day.replace(hour=int(hour), minute=int(minute), second=int(second or 0), microsecond=micro)


def _midnight(now_ns: int, tz: tzinfo, days: int) -> datetime:
    today = datetime.fromtimestamp(now_ns / 1e9, tz).replace(hour=0, minute=0, second=0, microsecond=0)
    # Add calendar days in the zone (a DST change keeps midnight at midnight).
    return (today.replace(tzinfo=None) + timedelta(days=days)).replace(tzinfo=tz)


def parse_time(text: str, now_ns: int | None = None, flag: str = "time", tz: tzinfo | None = None) -> int:
    """Nanoseconds since the epoch from any spelling in the module docstring; a one-line UserError otherwise."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    tz = tz or timezone.utc
    value = " ".join(str(text).split())
    lowered = value.lower()
    try:
        if lowered == "now":
            return now_ns
        if re.fullmatch(r"\d{9,11}(\.\d+)?", value):
            return int(float(value) * 1e9)
        word = _DAY_WORD.match(value)
        if word:
            return _ns(_at_clock(_midnight(now_ns, tz, _WORDS[word.group(1).lower()]), word, 2))
        clock = _TIME_OF_DAY.match(value)
        if clock:
            return _ns(_at_clock(_midnight(now_ns, tz, 0), clock, 1))
        absolute = _absolute(value, tz)
        if absolute is not None:
            return absolute
        relative = _RELATIVE.match(value)
        if relative and not (relative.group(1) == "+" and relative.group(3)):
            seconds = parse_duration(relative.group(2).strip())
            sign = 1 if relative.group(1) == "+" else -1
            return now_ns + sign * round(seconds * 1e9)
    except (ValueError, OverflowError, OSError):
        pass
    raise UserError(f"bad {flag} {text!r}: use {_EXAMPLES}")


def _absolute(value: str, tz: tzinfo) -> int | None:
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00").replace(",", "."))
    except ValueError:
        return None
    return _ns(dt if dt.tzinfo else dt.replace(tzinfo=tz))


def show(ns: int, tz: tzinfo | None = None) -> str:
    """`ns` as RFC 3339 with microseconds in `tz` (``…Z`` in UTC, ``…+02:00`` elsewhere)."""
    if tz is None or is_utc(tz):
        return format_ts(ns)
    seconds, rest = divmod(ns, 1_000_000_000)
    return datetime.fromtimestamp(seconds, tz).replace(microsecond=rest // 1000).isoformat(timespec="microseconds")
