"""What to select: :class:`QuerySpec` and the parsing of flag values into it.

Decisions where the spec is silent (also in ``ranklog query --help``):

- Times without a zone are UTC. ``start`` is inclusive and ``end`` exclusive (a half-open range, so
  ``--end 2025-10-02`` means "up to the end of October 1st" and adjacent ranges never overlap).
  Accepted spellings: RFC 3339 / ISO 8601 (``2025-10-01 08:00:00``, ``2025-10-01T08:00:00+02:00``,
  ``2025-10-01``), epoch seconds, ``now`` and relative ages (``2h``, ``30m ago``, ``now-2h``).
- ``--level X`` is a minimum (UNKNOWN is never included); ``--levels A,B`` is an exact set.
- ``--contains`` and ``--regex`` search the message *and* the exception text (a traceback belongs to
  the record it follows). ``--regex`` uses RE2 syntax (Arrow's and DuckDB's engine: no
  backreferences or look-around); a bad pattern fails before anything is read.
- ``--host`` and ``--logger`` values containing ``*``, ``?`` or ``[`` are shell-style globs.
- ``--attr k=v`` matches when the JSON ``attrs`` has key ``k`` (a dotted path reaches into nested
  objects) whose value, as text, equals ``v``; ``--attr k`` only requires the key.
- Several values of one filter are OR-ed; different filters are AND-ed.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import UserError
from ..record import FIELDS, LEVELS, levels_at_least, normalize_level, parse_ts
from ..units import parse_duration

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.dataset as ds

_RELATIVE = re.compile(r"^\s*(?:now\s*-\s*)?(\d+(?:\.\d*)?\s*[a-zA-Z]*)(?:\s+ago)?\s*$")
_GLOB_CHARS = re.compile(r"[*?\[]")
SORTABLE = frozenset(FIELDS) - {"attrs"}


@dataclass(frozen=True)
class QuerySpec:
    """A selection of records: every field left at its default selects everything.

    Serialisable (:meth:`to_dict` / :meth:`from_dict`) so a remote archive runs the same query.
    ``order`` lists sort keys (``ts``, ``-ts`` for descending, ``host``…); empty keeps storage order
    (cheapest). ``limit`` applies after sorting.
    """

    start_ns: int | None = None
    end_ns: int | None = None
    levels: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    ips: tuple[str, ...] = ()
    pids: tuple[int, ...] = ()
    ranks: tuple[int, ...] = ()
    jobs: tuple[str, ...] = ()
    trace_ids: tuple[str, ...] = ()
    loggers: tuple[str, ...] = ()
    step_min: int | None = None
    step_max: int | None = None
    contains: str | None = None
    regex: str | None = None
    ignore_case: bool = False
    attrs: tuple[str, ...] = ()
    limit: int | None = None
    order: tuple[str, ...] = ("ts",)

    def __post_init__(self) -> None:
        if self.start_ns is not None and self.end_ns is not None and self.end_ns <= self.start_ns:
            raise UserError("the time range is empty: end must be after start")
        if self.step_min is not None and self.step_max is not None and self.step_max < self.step_min:
            raise UserError("--step-max is below --step-min")
        if self.limit is not None and self.limit < 0:
            raise UserError("--limit must be >= 0")
        for level in self.levels:
            if level not in LEVELS:
                raise UserError(f"unknown level {level!r} (one of {', '.join(LEVELS)})")
        for key in self.order:
            if key.lstrip("-") not in SORTABLE:
                raise UserError(f"cannot sort by {key.lstrip('-')!r} (one of {', '.join(sorted(SORTABLE))})")
        if self.regex is not None:
            _check_regex(self.regex)

    # -- serialisation (remote queries) ------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, data: Any) -> QuerySpec:
        """A spec from untrusted JSON (a remote query): every key and value type is checked."""
        if not isinstance(data, dict):
            raise UserError("the query spec must be a JSON object")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(str(key) for key in set(data) - known)
        if unknown:
            raise UserError(f"unknown query key(s): {', '.join(unknown)}")
        return cls(**{name: _checked(name, value) for name, value in data.items()})

    # -- properties the engine uses ----------------------------------------------------------------
    @property
    def sorted_by_time(self) -> bool:
        """True when the order is by time alone (streamable partition by partition)."""
        return self.order in (("ts",), ("-ts",))

    @property
    def descending(self) -> bool:
        return bool(self.order) and self.order[0].startswith("-")

    def needs_python_filter(self) -> bool:
        return bool(self.attrs)

    def expression(self) -> ds.Expression | None:
        """The filter as a pyarrow dataset expression (pushed down to Parquet statistics)."""
        return build_expression(self)

    def filter_columns(self) -> list[str]:
        """The columns :meth:`expression` reads (kept next to :func:`build_expression`)."""
        used = [name for field, names in _FILTER_COLUMNS.items() if getattr(self, field) not in (None, ())
                for name in names]
        return list(dict.fromkeys(used))

    def python_filter(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Apply the parts an expression cannot express (JSON ``attrs``) to a filtered batch."""
        if not self.attrs or batch.num_rows == 0:
            return batch
        import pyarrow as pa

        wanted = [_parse_attr(item) for item in self.attrs]
        mask = [_attrs_match(text, wanted) for text in batch.column("attrs").to_pylist()]
        return batch.filter(pa.array(mask, pa.bool_()))


# -- validation of remote specs ----------------------------------------------------------------------
_INT_RANGES = {"start_ns": 63, "end_ns": 63, "step_min": 63, "step_max": 63, "limit": 63}
_INT_LISTS = {"pids": 31, "ranks": 31}
_STR_LISTS = ("levels", "hosts", "ips", "jobs", "trace_ids", "loggers", "attrs", "order")
_STRINGS = ("contains", "regex")


def _is_int(value: Any, bits: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -(1 << bits) <= value < (1 << bits)


def _checked(name: str, value: Any) -> Any:
    """`value` for field `name` if it has the right JSON type and range; UserError otherwise."""
    if name in _INT_RANGES:
        if value is None or _is_int(value, _INT_RANGES[name]):
            return value
        raise UserError(f"{name}: expected an integer (or null)")
    if name in _INT_LISTS:
        if isinstance(value, list) and all(_is_int(v, _INT_LISTS[name]) for v in value):
            return tuple(value)
        raise UserError(f"{name}: expected a list of integers")
    if name in _STR_LISTS:
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise UserError(f"{name}: expected a list of strings")
    if name in _STRINGS:
        if value is None or isinstance(value, str):
            return value
        raise UserError(f"{name}: expected a string (or null)")
    if not isinstance(value, bool):
        raise UserError(f"{name}: expected true or false")
    return value


# -- expression building ---------------------------------------------------------------------------
# The columns each spec field's filter reads: every field build_expression uses must be listed here.
_FILTER_COLUMNS: dict[str, tuple[str, ...]] = {
    "start_ns": ("ts",), "end_ns": ("ts",), "levels": ("level",), "hosts": ("host",), "loggers": ("logger",),
    "ips": ("ip",), "jobs": ("job",), "trace_ids": ("trace_id",), "pids": ("pid",), "ranks": ("rank",),
    "step_min": ("step",), "step_max": ("step",), "contains": ("msg", "exc"), "regex": ("msg", "exc"),
    "attrs": ("attrs",),
}


def _isin_or_glob(name: str, values: tuple[str, ...]) -> ds.Expression:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    exact = [v for v in values if not _GLOB_CHARS.search(v)]
    globs = [v for v in values if _GLOB_CHARS.search(v)]
    parts = []
    if exact:
        parts.append(ds.field(name).isin(pa.array(exact, pa.string())))
    for pattern in globs:
        regex = fnmatch.translate(pattern).replace(r"\Z", "$")
        parts.append(pc.match_substring_regex(ds.field(name), "^" + regex))
    return _or(parts)


def _or(parts: list) -> ds.Expression:
    out = parts[0]
    for part in parts[1:]:
        out = out | part
    return out


def build_expression(spec: QuerySpec) -> ds.Expression | None:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    ts_type = pa.timestamp("ns", tz="UTC")
    parts: list[ds.Expression] = []
    if spec.start_ns is not None:
        parts.append(ds.field("ts") >= pa.scalar(spec.start_ns, ts_type))
    if spec.end_ns is not None:
        parts.append(ds.field("ts") < pa.scalar(spec.end_ns, ts_type))
    if spec.levels:
        parts.append(ds.field("level").isin(pa.array(list(spec.levels), pa.string())))
    for name, values in (("host", spec.hosts), ("logger", spec.loggers)):
        if values:
            parts.append(_isin_or_glob(name, values))
    for name, values in (("ip", spec.ips), ("job", spec.jobs), ("trace_id", spec.trace_ids)):
        if values:
            parts.append(ds.field(name).isin(pa.array(list(values), pa.string())))
    if spec.pids:
        parts.append(ds.field("pid").isin(pa.array(list(spec.pids), pa.int32())))
    if spec.ranks:
        parts.append(ds.field("rank").isin(pa.array(list(spec.ranks), pa.int32())))
    if spec.step_min is not None:
        parts.append(ds.field("step") >= pa.scalar(spec.step_min, pa.int64()))
    if spec.step_max is not None:
        parts.append(ds.field("step") <= pa.scalar(spec.step_max, pa.int64()))
    text = text_condition(spec, ds.field("msg"), ds.field("exc"))
    if text is not None:
        parts.append(text)
    for item in spec.attrs:
        key, _ = _parse_attr(item)
        top = key.split(".")[0]
        parts.append(pc.match_substring(ds.field("attrs"), json.dumps(top)))
    if not parts:
        return None
    out = parts[0]
    for part in parts[1:]:
        out = out & part
    return out


def text_condition(spec: QuerySpec, msg: Any, exc: Any) -> Any:
    """The ``--contains`` / ``--regex`` condition on `msg` and `exc`, or None when there is none.

    Given dataset fields it is an expression (pushed into scans); given arrays, the boolean mask
    itself — one definition, so a search that evaluates it directly answers exactly like a scan.
    """
    import pyarrow.compute as pc

    parts = []
    for function, pattern in ((pc.match_substring, spec.contains), (pc.match_substring_regex, spec.regex)):
        if pattern is not None:
            in_msg = function(msg, pattern, ignore_case=spec.ignore_case)
            in_exc = function(exc, pattern, ignore_case=spec.ignore_case)
            parts.append(pc.or_kleene(in_msg, pc.and_kleene(pc.is_valid(exc), in_exc)))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else pc.and_kleene(parts[0], parts[1])


def _check_regex(pattern: str) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        pc.match_substring_regex(pa.array([""]), pattern)
    except (pa.ArrowInvalid, ValueError) as exc:
        raise UserError(f"bad --regex {pattern!r}: {str(exc).splitlines()[0]}") from None


# -- attrs ------------------------------------------------------------------------------------------
def _parse_attr(item: str) -> tuple[str, str | None]:
    key, sep, value = item.partition("=")
    key = key.strip()
    if not key:
        raise UserError(f"bad --attr {item!r}: use key=value or key")
    return key, (value if sep else None)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _attrs_match(text: str | None, wanted: list[tuple[str, str | None]]) -> bool:
    if not text:
        return False
    try:
        obj = json.loads(text)
    except ValueError:
        return False
    for key, value in wanted:
        node: Any = obj
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        if value is not None and _as_text(node) != value:
            return False
    return True


# -- parsing flag values ----------------------------------------------------------------------------
def parse_time(text: str, now_ns: int | None = None, flag: str = "time") -> int:
    """Nanoseconds since the epoch from an absolute or relative time (see the module docstring)."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    value = text.strip()
    if value.lower() == "now":
        return now_ns
    if re.fullmatch(r"\d{9,11}(\.\d+)?", value):
        return int(float(value) * 1e9)
    ns = parse_ts(value)
    if ns is not None:
        return ns
    match = _RELATIVE.match(value)
    if match:
        try:
            return now_ns - int(parse_duration(match.group(1).replace(" ", "")) * 1e9)
        except ValueError:
            pass
    raise UserError(f"bad {flag} {text!r}: use e.g. '2025-10-01 08:00:00' (UTC), RFC 3339, or 2h / 30m ago")


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


def spec_from_args(args: Any, now_ns: int | None = None) -> QuerySpec:
    """A :class:`QuerySpec` from the parsed filter flags (see :func:`add_filter_flags`)."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    start = parse_time(args.start, now_ns, "--start") if args.start else None
    end = parse_time(args.end, now_ns, "--end") if args.end else None
    if args.since:
        if start is not None:
            raise UserError("give either --since or --start, not both")
        start = parse_time(args.since, now_ns, "--since")
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


def add_filter_flags(parser: Any, trace_flag: bool = True) -> None:
    """The filter flags shared by query, stats, integrity and triage (both spellings of each)."""
    group = parser.add_argument_group("filters (several values are OR-ed, different filters AND-ed)")
    group.add_argument("--start", "--start_time", "--start-time", "--from", dest="start",
                       help="inclusive; '2025-10-01 08:00:00' (UTC unless a zone is given), RFC 3339, or 2h")
    group.add_argument("--end", "--end_time", "--end-time", "--until", "--to", dest="end",
                       help="exclusive; same spellings as --start")
    group.add_argument("--since", help="only the last DURATION (e.g. 2h, 30m, 7d)")
    group.add_argument("--level", help="minimum level (DEBUG, INFO, WARNING, ERROR, CRITICAL)")
    group.add_argument("--levels", action="append", help="exact levels, comma-separated")
    group.add_argument("--host", action="append", help="host name(s); globs allowed (node-1*)")
    group.add_argument("--ip", action="append", help="node IP address(es)")
    group.add_argument("--pid", action="append", help="process id(s)")
    group.add_argument("--rank", action="append", help="global rank(s) and ranges: 0-7,12")
    group.add_argument("--job", action="append", help="job / run id(s)")
    if trace_flag:
        group.add_argument("--trace-id", "--trace_id", dest="trace_id", action="append", help="trace id(s)")
    group.add_argument("--logger", action="append", help="logger name(s); globs allowed")
    group.add_argument("--step-min", "--step_min", dest="step_min", help="minimum training step")
    group.add_argument("--step-max", "--step_max", dest="step_max", help="maximum training step")
    group.add_argument("--contains", help="substring of the message or exception text")
    group.add_argument("--regex", help="RE2 regular expression searched in the message or exception")
    group.add_argument("-i", "--ignore-case", "--ignore_case", dest="ignore_case", action="store_true",
                       help="--contains / --regex ignore case")
    group.add_argument("--attr", action="append", help="attrs key=value (or key: present); repeatable")
