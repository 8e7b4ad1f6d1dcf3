"""The CLI's filter flags (``--since``, ``--level``, ``--rank 0-7``, ``--attr``…): their definitions and
the parsing of their values into a :class:`~.filters.QuerySpec` (semantics in :mod:`.filters`)."""

from __future__ import annotations

import re
import time
from typing import Any

from ..errors import UserError
from ..record import LEVELS, levels_at_least, normalize_level
from .filters import QuerySpec
from .times import parse_time, zone

__all__ = ["add_filter_flags", "add_time_flags", "parse_time", "spec_from_args", "split_list", "time_window"]

def split_list(values: list[str] | tuple[str, ...] | str | None) -> tuple[str, ...]:
    """Comma-separated and repeated flag values as one tuple (empty items dropped)."""
    if values is None:
        return ()
    if isinstance(values, str):
        values = [values]
    return tuple(part.strip() for item in values for part in item.split(",") if part.strip())


def parse_int_ranges(values: list[str] | str | None, flag: str = "--rank") -> tuple[int, ...]:
    """`0-7,12` → (0, 1, …, 7, 12); sorted, without duplicates."""
    out: set[int] = set()
    for part in split_list(values):
        match = re.fullmatch(r"(\d+)\s*(?:-\s*(\d+))?", part)
        if not match:
            raise UserError(f"bad {flag} {part!r}: use numbers and ranges like 0-7,12")
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) else low
        if high < low:
            raise UserError(f"bad {flag} {part!r}: range goes backwards")
        if high - low > 1_000_000:
            raise UserError(f"bad {flag} {part!r}: range too large")
        out.update(range(low, high + 1))
    return tuple(sorted(out))


def parse_levels(minimum: str | None, exact: list[str] | str | None) -> tuple[str, ...]:
    if minimum and exact:
        raise UserError("give either --level (a minimum) or --levels (an exact list), not both")
    if minimum:
        name = minimum.strip().upper()
        if normalize_level(name) == "UNKNOWN":
            raise UserError(f"unknown level {minimum!r} (one of {', '.join(LEVELS[:-1])})")
        return tuple(levels_at_least(name))
    out = []
    for item in split_list(exact):
        name = item.upper() if item.upper() == "UNKNOWN" else normalize_level(item)
        if name == "UNKNOWN" and item.upper() != "UNKNOWN":
            raise UserError(f"unknown level {item!r} (one of {', '.join(LEVELS)})")
        out.append(name)
    return tuple(dict.fromkeys(out))


def parse_order(text: str | None) -> tuple[str, ...]:
    """`--sort ts` / `ts:desc` / `--sort=-ts` / `host,ts` / `none` → sort keys (`-` prefix: descending)."""
    if text is None:
        return ("ts",)
    if text.strip().lower() in ("none", ""):
        return ()
    keys = []
    for item in split_list(text):
        name, _, direction = item.partition(":")
        if direction.lower() not in ("", "asc", "desc"):
            raise UserError(f"bad --sort {item!r}: use KEY, KEY:desc or -KEY")
        keys.append(f"-{name.lstrip('-')}" if direction.lower() == "desc" else name)
    return tuple(keys)


def _int_or_none(value: str | None, flag: str) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise UserError(f"bad {flag} {value!r}: expected an integer") from None


def time_window(args: Any, now_ns: int | None = None) -> tuple[int | None, int | None]:
    """(start, end) in ns from ``--since`` / ``--from`` / ``--until`` (see :func:`add_time_flags`)."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    tz = zone(getattr(args, "tz", None))
    start = parse_time(args.start, now_ns, "--start/--from", tz) if args.start else None
    end = parse_time(args.end, now_ns, "--end/--until", tz) if args.end else None
    if getattr(args, "since", None):
        if start is not None:
            raise UserError("give either --since or --start/--from, not both")
        start = parse_time(args.since, now_ns, "--since", tz)
    if start is not None and end is not None and end <= start:
        raise UserError("the time range is empty: end must be after start (--until/--end after --from/--start)")
    return start, end


def spec_from_args(args: Any, now_ns: int | None = None) -> QuerySpec:
    """A :class:`QuerySpec` from the parsed filter flags (see :func:`add_filter_flags`)."""
    start, end = time_window(args, now_ns)
    pids = []
    for item in split_list(args.pid):
        pid = _int_or_none(item, "--pid")
        if pid is not None:
            pids.append(pid)
    return QuerySpec(
        start_ns=start, end_ns=end,
        levels=parse_levels(args.level, args.levels),
        hosts=split_list(args.host), ips=split_list(args.ip), pids=tuple(pids),
        ranks=parse_int_ranges(args.rank), jobs=split_list(args.job),
        trace_ids=split_list(getattr(args, "trace_id", None)), loggers=split_list(args.logger),
        step_min=_int_or_none(args.step_min, "--step-min"), step_max=_int_or_none(args.step_max, "--step-max"),
        contains=args.contains, regex=args.regex, ignore_case=bool(args.ignore_case),
        attrs=tuple(args.attr or ()),
        limit=_int_or_none(getattr(args, "limit", None), "--limit"),
        order=parse_order(getattr(args, "sort", None)),
    )


TIME_HELP = ("TIME is '2025-10-01 08:00:00', RFC 3339, epoch seconds, a duration back from now (2h, 1h30m, "
             "-30m, '1h ago'), today, yesterday, 'yesterday 14:00' or 08:00; without a zone it is read in --tz")


def add_time_flags(parser: Any, title: str = "time range") -> None:
    """``--since``, ``--from`` (``--start``, ``--start_time``), ``--until`` (``--to``, ``--end``,
    ``--end_time``) and ``--tz``: the time flags of every read command (values: :mod:`.times`)."""
    group = parser.add_argument_group(title, TIME_HELP)
    group.add_argument("--since", metavar="TIME", help="from this TIME on, e.g. 2h (the last two hours), 1h30m, today")
    group.add_argument("--from", "--start", "--start_time", "--start-time", dest="start", metavar="TIME",
                       help="inclusive start (same as --since; also spelled --start, --start_time)")
    group.add_argument("--until", "--to", "--end", "--end_time", "--end-time", dest="end", metavar="TIME",
                       help="exclusive end (also spelled --to, --end, --end_time)")
    group.add_argument("--tz", metavar="ZONE", help="zone times are shown in and read in when they carry none: "
                       "UTC (default), local, or a name such as Europe/Paris (default: $RANKLOG_TZ, else UTC); with "
                       "--log_dir also the zone its times printed without one are read in (default: this machine's)")


def add_filter_flags(parser: Any, trace_flag: bool = True) -> None:
    """The filter flags shared by query, stats, integrity and triage (both spellings of each)."""
    add_time_flags(parser)
    group = parser.add_argument_group("filters (several values are OR-ed, different filters AND-ed)")
    group.add_argument("--level", help="minimum level (DEBUG, INFO, WARNING, ERROR, CRITICAL)")
    group.add_argument("--levels", action="append", help="exact levels, comma-separated")
    group.add_argument("--host", action="append", help="host name(s); globs allowed (node-1*, n*0*); \\ makes the next character literal")
    group.add_argument("--ip", action="append", help="node IP address(es)")
    group.add_argument("--pid", action="append", help="process id(s)")
    group.add_argument("--rank", action="append", help="global rank(s) and ranges: 0-7,12")
    group.add_argument("--job", action="append", help="job / run id(s); globs allowed (ppo-*), as for --host")
    if trace_flag:
        group.add_argument("--trace-id", "--trace_id", dest="trace_id", action="append", help="trace id(s)")
    group.add_argument("--logger", action="append", help="logger name(s); globs allowed; \\ makes the next character literal")
    group.add_argument("--step-min", "--step_min", dest="step_min", help="minimum training step")
    group.add_argument("--step-max", "--step_max", dest="step_max", help="maximum training step")
    group.add_argument("--contains", help="substring of the message or exception text")
    group.add_argument("--regex", help="RE2 regular expression searched in the message or exception")
    group.add_argument("-i", "--ignore-case", "--ignore_case", dest="ignore_case", action="store_true",
                       help="--contains / --regex ignore case")
    group.add_argument("--attr", action="append", help="attrs key=value (or key: present); repeatable")
