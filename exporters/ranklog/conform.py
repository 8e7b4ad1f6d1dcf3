"""One way to bring an Arrow table or batch to the record schema (:func:`ranklog.record.arrow_schema`).

Two uses, one function. Readers (query over Parquet files, log directories, the severe index) want
*lenient*: the columns they ask for, in the schema's types, missing ones as nulls — files written by
an older archive or a raw log directory may lack a column. Ingest wants *strict*: a body from the
network must carry exactly known columns, the required ones without nulls, values that cast safely
and valid Arrow data; anything else is a :class:`SchemaMismatch` naming the column, which the archive
answers with a 400 (see :mod:`ranklog.archive.ingest` for why the full validation stays).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from .record import FIELDS, LEVELS, REQUIRED, arrow_schema, normalize_level, ts_array

_LEVEL_SET = frozenset(LEVELS)


class SchemaMismatch(ValueError):
    """A table that cannot be stored as records; the message names the offending column."""


def conform(data: pa.Table | pa.RecordBatch, names: Sequence[str] = FIELDS, *, strict: bool = False) -> pa.Table:
    """`data` as a table of exactly `names` (record fields) in the record schema's types.

    Lenient (default): missing columns become nulls, others are cast. Strict (`names` must be all
    fields): see the module docstring; raises :class:`SchemaMismatch`.
    """
    if strict:
        return _conform_strict(data)
    schema = arrow_schema()
    if tuple(names) == FIELDS and data.schema.equals(schema):
        return data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
    columns = []
    for name in names:
        field = schema.field(name)
        if name in data.schema.names:
            column = data.column(name)
            if column.type != field.type:
                column = ts_array(column) if name == "ts" else column.cast(field.type)
            columns.append(column)
        else:
            columns.append(pa.nulls(data.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=pa.schema([schema.field(n) for n in names]))


def _conform_strict(table: pa.Table) -> pa.Table:
    schema = arrow_schema()
    names = table.column_names
    if len(set(names)) != len(names):
        raise SchemaMismatch("duplicate column names in the Arrow schema")
    unknown = [name for name in names if schema.get_field_index(name) < 0]
    if unknown:
        raise SchemaMismatch(f"unknown column(s) {', '.join(map(repr, unknown))}: send extra fields inside 'attrs' (JSON text)")
    missing = [name for name in FIELDS if name in REQUIRED and name not in names]
    if missing:
        raise SchemaMismatch(f"missing required column(s) {', '.join(map(repr, missing))}")
    columns = []
    for field in schema:
        if field.name not in names:
            columns.append(pa.nulls(table.num_rows, field.type))
            continue
        column = _cast(table[field.name], field)
        if not field.nullable and column.null_count:
            raise SchemaMismatch(f"column {field.name!r}: {column.null_count} null value(s) in a required column")
        columns.append(column)
    columns[FIELDS.index("level")] = canonical_levels(columns[FIELDS.index("level")])
    out = pa.Table.from_arrays(columns, schema=schema)
    try:  # see ranklog.archive.ingest: why the full check stays on the ACK path
        out.validate(full=True)
    except pa.ArrowInvalid as exc:
        raise SchemaMismatch(f"invalid Arrow data: {str(exc).splitlines()[0][:200]}") from None
    return out


def _cast(column: pa.ChunkedArray, field: pa.Field) -> pa.ChunkedArray:
    if pa.types.is_dictionary(column.type):
        column = pc.cast(column, column.type.value_type)
    if column.type == field.type:
        return column
    if pa.types.is_timestamp(column.type) and pa.types.is_timestamp(field.type):
        return pa.chunked_array([ts_array(column)])  # any unit, naive taken as UTC; out of range → null
    try:
        return pc.cast(column, field.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaMismatch(f"column {field.name!r}: cannot use {column.type} as {field.type}: "
                             f"{str(exc).splitlines()[0][:160]}") from None


def canonical_levels(level: pa.ChunkedArray) -> pa.ChunkedArray:
    """Canonical level names, computed on the distinct values only (vectorized)."""
    distinct = pc.unique(level)
    if all(value in _LEVEL_SET for value in distinct.to_pylist()):
        return level
    mapped = pa.array([normalize_level(value) for value in distinct.to_pylist()], pa.string())
    return pc.take(mapped, pc.index_in(level, value_set=distinct))
