"""The record: one row of the archive. Field names, level normalisation and the Arrow schema.

Every part of ranklog (logger, parsers, agent, archive, query, triage) uses these names; the
in-process logger writes JSON objects with exactly these keys. This module is importable without
pyarrow: the schema is built on demand by :func:`arrow_schema`.

`level` is a plain Arrow string in memory and on the wire; the Parquet writer dictionary-encodes it
(and the other low-cardinality columns), which is what "string (dictionary)" means in DESIGN.md.

`ts` is `timestamp[us, UTC]` in memory, on the wire and in Parquet (`TIMESTAMP(MICROS,
isAdjustedToUTC=true)`): Spark ≥ 3.2 and Trino refuse Parquet NANOS (SPARK-40819). Records within
one microsecond keep their order by `seq` / `offset`. Python code keeps nanosecond integers
(`parse_ts`, query bounds, triage) and turns them into the column only through :func:`ts_array`,
which also keeps every stored `ts` inside the nanosecond range (years 1677–2262) so that converting
back to nanoseconds (DuckDB's `epoch_ns`, numpy) can never overflow.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

FIELDS: tuple[str, ...] = (
    "ts", "level", "msg", "exc", "logger", "host", "ip", "pid", "rank", "local_rank", "job", "role",
    "trace_id", "step", "seq", "source", "source_id", "offset", "format", "attrs",
)
# Columns that are never null in the archive (parsers fill a default when the line has none).
REQUIRED: frozenset[str] = frozenset({"ts", "level", "msg", "host", "ip", "source", "source_id", "offset", "format"})
INT32_FIELDS = ("pid", "rank", "local_rank")
INT64_FIELDS = ("step", "seq", "offset")
# Low-cardinality string columns: dictionary-encoded in Parquet.
DICTIONARY_FIELDS = ("level", "logger", "host", "ip", "job", "role", "source", "source_id", "format")
# The `format` of ranklog's own verdict records (`ranklog triage --annotate`): stored beside the logs
# for Grafana's annotations, but no log line, so queries and triage leave them out unless asked.
ANNOTATION_FORMAT = "triage"
# Where a record's `attrs` hold training metrics: the top level (the logger's ``extra=`` fields) or
# one of these objects (verl's JSONL ``{"step": N, "data": {…}}``). The agent's metrics and the
# report read them the same way.
METRIC_CONTAINERS = ("data", "metrics")

# Arrow ingest bodies may declare, in their schema metadata under this key, the byte spans they
# cover completely: JSON ``[[source_id, start, end], …]`` — every record of `source_id` starting in
# [start, end) is in the body. The archive's exact dedup then keeps one range for a whole span
# instead of one key per record (see ranklog.archive.dedup). A body that holds only part of a span's
# records (a split request) must not declare it.
SPANS_METADATA_KEY = b"ranklog.spans"

LEVELS: tuple[str, ...] = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "UNKNOWN")
LEVEL_NUMBERS: dict[str, int] = {"UNKNOWN": 0, "DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}
_LEVEL_ALIASES: dict[str, str] = {
    "DEBUG": "DEBUG", "D": "DEBUG", "TRACE": "DEBUG", "DBG": "DEBUG", "VERBOSE": "DEBUG", "NOTSET": "DEBUG",
    "V": "DEBUG", "T": "DEBUG",
    "INFO": "INFO", "I": "INFO", "INFORMATION": "INFO", "NOTICE": "INFO",
    "WARNING": "WARNING", "WARN": "WARNING", "W": "WARNING",
    "ERROR": "ERROR", "ERR": "ERROR", "E": "ERROR",
    "CRITICAL": "CRITICAL", "CRIT": "CRITICAL", "FATAL": "CRITICAL", "F": "CRITICAL", "C": "CRITICAL",
    "EMERG": "CRITICAL", "ALERT": "CRITICAL", "PANIC": "CRITICAL",
}


def normalize_level(value: object) -> str:
    """Map any spelling (`warn`, `E`, `fatal`, 40) to one of :data:`LEVELS`; unknown → `UNKNOWN`."""
    if value is None:
        return "UNKNOWN"
    if isinstance(value, int) and not isinstance(value, bool):
        for name in ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG"):
            if value >= LEVEL_NUMBERS[name]:
                return name
        return "DEBUG"
    return _LEVEL_ALIASES.get(str(value).strip().upper(), "UNKNOWN")


def levels_at_least(minimum: str) -> list[str]:
    """The normalized levels at or above `minimum` (UNKNOWN is never included)."""
    floor = LEVEL_NUMBERS[normalize_level(minimum)]
    return [name for name in LEVELS if name != "UNKNOWN" and LEVEL_NUMBERS[name] >= floor]


def format_ts(ns: int) -> str:
    """RFC 3339 UTC with microseconds, the logger's `ts` spelling: `2026-12-02T13:04:05.123456Z`."""
    seconds, rest = divmod(ns, 1_000_000_000)
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{rest // 1000:06d}Z"


def parse_ts(value: object) -> int | None:
    """Nanoseconds since the epoch from RFC 3339 / ISO 8601 text, epoch seconds (int/float) or datetime.

    Naive times are taken as UTC. Returns None when the value is not a time.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, datetime):
        dt = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return int(dt.timestamp()) * 1_000_000_000 + dt.microsecond * 1000
    if isinstance(value, (int, float)):
        # Magnitude tells the unit: seconds, milliseconds, microseconds or nanoseconds since the epoch.
        magnitude = abs(value)
        scale = 10**9 if magnitude < 1e11 else 10**6 if magnitude < 1e14 else 10**3 if magnitude < 1e17 else 1
        if not magnitude * scale < 9.2e18:  # also NaN
            return None
        return value * scale if isinstance(value, int) else round(value * scale)
    text = str(value).strip()
    if not text:
        return None
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00").replace(",", "."))
    except ValueError:
        return None
    dt = dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)
    return (int(dt.replace(microsecond=0).timestamp()) * 1_000_000 + dt.microsecond) * 1000


@lru_cache(maxsize=1)
def arrow_schema() -> pa.Schema:
    """The Arrow schema of a record batch, on the wire and in Parquet."""
    import pyarrow as pa

    types: dict[str, pa.DataType] = {name: pa.string() for name in FIELDS}
    types["ts"] = pa.timestamp(TS_UNIT, tz="UTC")
    for name in INT32_FIELDS:
        types[name] = pa.int32()
    for name in INT64_FIELDS:
        types[name] = pa.int64()
    return pa.schema([pa.field(name, types[name], nullable=name not in REQUIRED) for name in FIELDS])


def attrs_object(attrs: str | None) -> dict[str, Any]:
    """A row's attrs JSON text as a dict; text that is not a JSON object is kept under ``attrs``,
    so a note can be added to any row without losing what it carried."""
    try:
        own = json.loads(attrs) if attrs else {}
    except ValueError:
        own = {"attrs": attrs}
    return own if isinstance(own, dict) else {"attrs": own}


def split_known(obj: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split a JSON object into known record fields and the rest (which belongs in `attrs`)."""
    known = {k: v for k, v in obj.items() if k in _FIELD_SET}
    extra = {k: v for k, v in obj.items() if k not in _FIELD_SET}
    return known, extra


_FIELD_SET = frozenset(FIELDS)

# The unit of `ts` everywhere Arrow holds it (in memory, on the wire, in Parquet). Change it here only.
TS_UNIT = "us"
_NS_PER_TS_UNIT = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
NS_PER_TS = _NS_PER_TS_UNIT[TS_UNIT]
# The nanosecond range of int64, ±TS_MAX_NS (what numpy's datetime64[ns] and DuckDB's epoch_ns can hold).
TS_MAX_NS = 2**63 - 1


def __getattr__(name: str) -> Any:
    """`TS_TYPE` (the Arrow type of `ts`), built on first use so this module needs no pyarrow."""
    if name == "TS_TYPE":
        return arrow_schema().field("ts").type
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def ns_to_ts(ns: int, *, ceil: bool = False) -> int:
    """A nanosecond time as a value of the `ts` unit (floor, or ceil: for exclusive/lower bounds)."""
    return -(-ns // NS_PER_TS) if ceil else ns // NS_PER_TS


def ts_array(values: Any, unit: str = "ns") -> pa.Array:
    """`values` as the `ts` column (`timestamp[us, UTC]`), never raising on a value out of range.

    `values`: a pyarrow array (integers in `unit`, or timestamps of any unit/zone), a numpy array or
    a sequence of ints/None in `unit`. Finer units are floored to microseconds; a value outside the
    nanosecond range of int64 (1677-09-21 … 2262-04-11) becomes null, so the caller's inference
    rule fills it (see DESIGN: a line without a usable time takes its neighbour's).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    ts_type = arrow_schema().field("ts").type
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        if pa.types.is_timestamp(values.type):
            unit = values.type.unit
        elif pa.types.is_null(values.type):
            return pa.nulls(len(values), ts_type)
        ints = pc.cast(values, pa.int64(), safe=False)
        mask = np.asarray(ints.is_null())
        raw = np.asarray(ints.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    else:
        items = values if isinstance(values, np.ndarray) and values.dtype != object else list(values)
        if isinstance(items, np.ndarray):
            mask = np.zeros(len(items), bool)
            raw = items.astype(np.int64, copy=False)
        else:
            bound = TS_MAX_NS // _NS_PER_TS_UNIT[unit]
            mask = np.array([not (_is_int(v) and -bound <= v <= bound) for v in items], bool)
            raw = np.array([0 if bad else v for bad, v in zip(mask, items, strict=True)], np.int64)
    scale = _NS_PER_TS_UNIT[unit]
    bound = TS_MAX_NS // scale
    mask = mask | (raw > bound) | (raw < -bound)
    raw = np.where(mask, 0, raw)
    out = raw * (scale // NS_PER_TS) if scale >= NS_PER_TS else np.floor_divide(raw, NS_PER_TS // scale)
    return pa.array(out, pa.int64(), mask=mask if mask.any() else None).cast(ts_type)


# Text fields a writer may fill with a whole number, kept as its digits: a scheduler's job id
# (`"job": int(os.environ["SLURM_JOB_ID"])`) is the job, not a value of the wrong type.
NUMBERED_TEXT_FIELDS = frozenset({"job"})


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def ts_ns(column: Any) -> Any:
    """The `ts` column (Arrow, any timestamp unit) as an int64 numpy array of nanoseconds (nulls → 0)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    scale = _NS_PER_TS_UNIT[column.type.unit] if pa.types.is_timestamp(column.type) else NS_PER_TS
    ints = pc.cast(column, pa.int64(), safe=False).fill_null(0)
    return np.asarray(ints.to_numpy(zero_copy_only=False), dtype=np.int64) * scale


def _coerce_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: ±Infinity (1e400 in JSON)
        return None


def _in_range(value: int | None, bits: int) -> int | None:
    if value is None:
        return None
    limit = 1 << (bits - 1)
    return value if -limit <= value < limit else None


def normalize_row(row: Mapping[str, Any], defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Coerce one loosely-typed mapping into a record dict with every field, ready for Arrow.

    Unknown keys, and known keys whose value has the wrong type, go into `attrs` (JSON) so nothing
    the input carried is lost. `defaults` fill fields the row does not have (host, source, …).
    """
    known, extra = split_known(row)
    if isinstance(known.get("attrs"), str):
        try:
            parsed = json.loads(known["attrs"])
            if isinstance(parsed, dict):
                extra = {**parsed, **extra}
        except ValueError:
            extra["attrs"] = known["attrs"]
    elif isinstance(known.get("attrs"), Mapping):
        extra = {**known["attrs"], **extra}
    out: dict[str, Any] = dict(defaults or {})
    for name in FIELDS:
        if name == "attrs" or name not in known:
            continue
        value = known[name]
        if name == "ts":
            ns = parse_ts(value)
            if ns is None and value is not None:
                extra["ts"] = value
            value = ns if ns is not None else out.get("ts")
        elif name == "level":
            value = normalize_level(value)
        elif name in INT32_FIELDS or name in INT64_FIELDS:
            coerced = _in_range(_coerce_int(value), 32 if name in INT32_FIELDS else 64)
            if coerced is None and value is not None:
                extra[name] = value
            value = coerced
        elif value is not None and not isinstance(value, str):
            if name == "msg" or (name in NUMBERED_TEXT_FIELDS and _is_int(value)):
                value = str(value)
            else:
                extra[name] = value
                value = None
        out[name] = value
    out.setdefault("level", "UNKNOWN")
    out["msg"] = out.get("msg") or ""
    out["attrs"] = json.dumps(extra, default=str, ensure_ascii=False, separators=(",", ":")) if extra else None
    return out


def rows_to_table(rows: Iterable[Mapping[str, Any]], defaults: Mapping[str, Any] | None = None) -> pa.Table:
    """Build a schema-conformant Arrow table from loosely-typed dicts (the slow, general path).

    Hot paths (parsers, ingest) build columns in bulk instead; this serves NDJSON ingest of odd
    shippers, tests and tools.
    """

    return records_table([normalize_row(row, defaults) for row in rows])


def records_table(normalized: Sequence[Mapping[str, Any]]) -> pa.Table:
    """A table of rows already shaped by :func:`normalize_row` (`ts` as nanosecond integers)."""
    import pyarrow as pa

    columns: dict[str, Any] = {name: [row.get(name) for row in normalized] for name in FIELDS}
    columns["ts"] = ts_array(columns["ts"])
    return pa.Table.from_pydict(columns, schema=arrow_schema())
