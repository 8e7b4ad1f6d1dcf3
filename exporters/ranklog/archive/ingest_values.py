"""Ingest is total over values: no value a body carries can make the archive refuse its batch.

A record whose known field holds a value the record schema cannot store as given — a timestamp out
of range or not a time, an integer beyond int32/int64, NaN, an object where a string belongs, a null
in a required column — is kept: the field becomes null (or its default), the value as sent goes to
``attrs`` under the field's own name, and ``attrs.parse_error`` names the field(s). A record left
without a usable time takes DESIGN's inference rule within its source in the body: the time of the
nearest earlier timestamped record of the same ``source_id`` (by offset), else the nearest later
one, else the receive time; it is marked ``attrs.ts_inferred`` (``previous``/``next``/``received``). Only the shape of a body (not an
Arrow stream, a line that is not a JSON object, an unknown column) is still a 400: that is a
sender bug, which the agent isolates by bisecting (see :mod:`ranklog.agent.ship`).

Kept apart from :mod:`.ingest` (the wire formats) so that decoders for other shapes can share it.
The count of repaired records travels with the decoded table in its schema metadata
(:func:`pop_repaired`), so decoding stays a pure function for WAL replay.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..record import FIELDS, REQUIRED, arrow_schema, attrs_object, parse_ts, ts_array

PARSE_ERROR = "parse_error"
TS_INFERRED = "ts_inferred"
_REPAIRED_KEY = b"ranklog.repaired"
# Nanoseconds that any timestamp unit can hold: the record's ts stays inside int64 nanoseconds.
_NS_MIN, _NS_MAX = -(2**63) + 1, 2**63 - 1
_STRING_DEFAULTS = {"host": "unknown", "ip": "", "source": "ingest", "format": "json", "msg": "", "level": "UNKNOWN"}


def ts_ok(ns: Any) -> bool:
    return isinstance(ns, int) and not isinstance(ns, bool) and _NS_MIN <= ns <= _NS_MAX


def _describe(value: Any) -> Any:
    """A JSON-safe spelling of a value, recursively: NaN/inf and ints beyond int64 as text (strict
    JSON readers such as DuckDB refuse the former, and many cannot hold the latter)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        return str(value)
    if isinstance(value, dict):
        return {str(k): _describe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_describe(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _with_errors(attrs: str | None, rejected: dict[str, Any], fields: Sequence[str]) -> str:
    """attrs JSON with the rejected values and the parse_error note added (the row's own keys kept)."""
    own = attrs_object(attrs)
    note = ", ".join(sorted(fields))
    if own.get(PARSE_ERROR):
        note = f"{own[PARSE_ERROR]}; {note}"
    merged = _describe({**own, **rejected, PARSE_ERROR: f"unusable value in: {note}"})
    return json.dumps(merged, ensure_ascii=False, separators=(",", ":"), default=str, allow_nan=False)


def _mark_inferred(attrs: str | None, reason: str) -> str:
    own = attrs_object(attrs)
    own[TS_INFERRED] = reason
    return json.dumps(own, ensure_ascii=False, separators=(",", ":"), default=str)


def infer_times(ts: list[int | None], source_ids: Sequence[str], offsets: Sequence[int],
                received_ns: int) -> list[str | None]:
    """Fill None entries of `ts` in place (DESIGN's rule within each source); returns per row how:
    ``previous`` / ``next`` (the parsers' words, :mod:`ranklog.parse.inferred_time`), ``received``
    when the source has no time at all in the body, None where the row had its own."""
    reasons: list[str | None] = [None] * len(ts)
    if all(value is not None for value in ts):
        return reasons
    by_source: dict[str, list[int]] = {}
    for i, sid in enumerate(source_ids):
        by_source.setdefault(sid, []).append(i)
    for rows in by_source.values():
        rows.sort(key=lambda i: offsets[i])
        known = [ts[i] for i in rows if ts[i] is not None]
        previous, reason = (known[0], "next") if known else (received_ns, "received")
        for i in rows:
            if ts[i] is None:
                ts[i], reasons[i] = previous, reason
            else:
                previous, reason = ts[i], "previous"
    return reasons


# --- NDJSON rows (after record.normalize_row) -----------------------------------------------------

def repair_rows(rows: list[dict[str, Any]], given: Sequence[dict[str, Any]], received_ns: int) -> int:
    """Make rows from ``record.normalize_row`` storable, in place; `given` are the objects they came from.

    A known field the object carried (non-null) that the row lost was unusable as given
    (``normalize_row`` already keeps the value in attrs); a time beyond the storable range is taken
    out here. Both get the parse_error note. Returns how many rows were repaired.
    """
    repaired = 0
    for row, obj in zip(rows, given, strict=True):
        if row.get("ts") is not None and not ts_ok(row["ts"]):
            row["ts"] = None
        rejected = {name: obj[name] for name in _CHECKED if obj.get(name) is not None and row.get(name) is None}
        if rejected:
            row["attrs"] = _with_errors(row.get("attrs"), rejected, list(rejected))
            repaired += 1
    ts = [row.get("ts") for row in rows]
    reasons = infer_times(ts, [row["source_id"] for row in rows], [row["offset"] for row in rows], received_ns)
    for row, value, reason in zip(rows, ts, reasons, strict=True):
        row["ts"] = value
        if reason:
            row["attrs"] = _mark_inferred(row.get("attrs"), reason)
    return repaired


_CHECKED = tuple(name for name in FIELDS if name not in ("attrs", "source_id", "offset"))


# --- Arrow tables (before the strict conform) -----------------------------------------------------

_REJECT = object()


def _storable(value: Any, kind: pa.DataType) -> Any:
    """One value as `kind` can store it (timestamps as nanosecond ints), or _REJECT."""
    if value is None:
        return None
    if pa.types.is_timestamp(kind):
        ns = parse_ts(value)
        return ns if ts_ok(ns) else _REJECT
    try:
        return pa.array([value]).cast(kind)[0].as_py()
    except (pa.ArrowException, OverflowError, ValueError, TypeError):
        return _REJECT


def _raw_values(column: pa.ChunkedArray) -> list[Any]:
    """The values as sent; timestamps as exact nanosecond ints (Python ints never overflow)."""
    if pa.types.is_dictionary(column.type):
        column = pc.cast(column, column.type.value_type)
    if not pa.types.is_timestamp(column.type):
        return column.to_pylist()
    per = _per(column.type)
    return [None if v is None else v * per for v in column.cast(pa.int64()).to_pylist()]


def _ns_text(ns: int) -> str:
    """A sent timestamp the record cannot hold, spelled as RFC 3339 when Python can, else in ns."""
    try:
        return (datetime(1970, 1, 1) + timedelta(microseconds=ns // 1000)).isoformat() + "Z"
    except OverflowError:
        return f"{ns}ns since the epoch"


def _ts_column(ns: list[int | None], kind: pa.DataType) -> pa.Array:
    per = _per(kind)
    return pa.array([None if v is None else v // per for v in ns], pa.int64()).cast(kind)


def repair_arrow(table: pa.Table, received_ns: int) -> pa.Table:
    """`table` with every value the record schema cannot hold moved to attrs (see module docstring).

    Columns that cast cleanly (the agent's always do) cost one cast attempt and nothing else; a
    schema-level problem (unknown or duplicate columns) and a missing or unusable idempotency key
    (`source_id`, `offset`) are left for the strict conform to refuse.
    """
    schema = arrow_schema()
    names = table.column_names
    if len(set(names)) != len(names) or any(schema.get_field_index(n) < 0 for n in names):
        return table
    n = table.num_rows
    rejected: list[dict[str, Any]] = [{} for _ in range(n)]
    columns: dict[str, Any] = {name: table.column(name) for name in names}
    ts_ns: list[Any] | None = None
    for name in names:
        field = schema.field(name)
        if _casts(columns[name], field):
            continue
        raw = _raw_values(columns[name])
        values = [_storable(v, field.type) for v in raw]
        for i, value in enumerate(values):
            if value is _REJECT:
                rejected[i][name] = _ns_text(raw[i]) if pa.types.is_timestamp(columns[name].type) else raw[i]
        clean = [None if v is _REJECT else v for v in values]
        if pa.types.is_timestamp(field.type):
            ts_ns = clean
            columns[name] = _ts_column(clean, field.type)
        else:
            columns[name] = pa.array(clean, field.type)
    for name in REQUIRED - {"ts", "source_id", "offset"}:
        if name in columns and columns[name].null_count:
            columns[name] = pc.fill_null(columns[name], _STRING_DEFAULTS.get(name, ""))
    bad_rows = [i for i in range(n) if rejected[i]]
    ts_nulls = columns["ts"].null_count if "ts" in columns else n
    if not bad_rows and not ts_nulls:
        return pa.table({k: columns[k] for k in names})
    attrs = (columns["attrs"].cast(pa.string()).to_pylist() if "attrs" in columns else [None] * n)
    for i in bad_rows:
        attrs[i] = _with_errors(attrs[i], rejected[i], list(rejected[i]))
    if ts_nulls:
        if ts_ns is None:
            ts_ns = _raw_values(pa.chunked_array([ts_array(columns["ts"])])) if "ts" in columns else [None] * n
        sids = columns["source_id"].to_pylist() if "source_id" in columns else [""] * n
        offsets = columns["offset"].to_pylist() if "offset" in columns else list(range(n))
        reasons = infer_times(ts_ns, [s or "" for s in sids], [-1 if o is None else o for o in offsets], received_ns)
        for i, reason in enumerate(reasons):
            if reason:
                attrs[i] = _mark_inferred(attrs[i], reason)
        columns["ts"] = _ts_column(ts_ns, schema.field("ts").type)
    columns["attrs"] = pa.array(attrs, pa.string())
    return with_repaired(pa.table({k: columns[k] for k in FIELDS if k in columns}), len(bad_rows))


def _per(kind: pa.DataType) -> int:
    return {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[kind.unit]


def _casts(column: pa.ChunkedArray, field: pa.Field) -> bool:
    kind = column.type
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
        column = pc.cast(column, kind)
    if kind == field.type:
        return True
    if pa.types.is_timestamp(kind) and pa.types.is_timestamp(field.type):
        # the record's ts holds only what int64 nanoseconds can (record.ts_array nulls the rest)
        return ts_array(column).null_count == column.null_count
    try:
        pc.cast(column, field.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


def with_repaired(table: pa.Table, repaired: int) -> pa.Table:
    """`table` carrying the count of repaired records (read back by :func:`pop_repaired`)."""
    if not repaired:
        return table
    return table.replace_schema_metadata({**(table.schema.metadata or {}), _REPAIRED_KEY: str(repaired).encode()})


def pop_repaired(table: pa.Table) -> tuple[pa.Table, int]:
    """(the table without the count, the number of records whose values were repaired)."""
    meta = table.schema.metadata or {}
    if _REPAIRED_KEY not in meta:
        return table, 0
    rest = {k: v for k, v in meta.items() if k != _REPAIRED_KEY}
    return table.replace_schema_metadata(rest or None), int(meta[_REPAIRED_KEY])
