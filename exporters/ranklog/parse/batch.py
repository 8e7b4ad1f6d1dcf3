"""The shared batch builder: parser columns + source context → one schema-conformant RecordBatch.

Every parser hands over whatever columns its format yields (any subset of the record fields, nulls
where a line had nothing); this module fills the rest the same way for all formats: a missing
`ts` from the file's nearest timestamped line or its modification time (:mod:`.inferred_time`), `UNKNOWN` level, the context's host/ip/source/source_id/format, the layout
defaults of `ctx.fields` (job, rank, …) where the line has none, and layout attributes such as the
torchrun `attempt` merged into `attrs` (the line's own attrs win on a clash).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ranklog.record import FIELDS, INT32_FIELDS, INT64_FIELDS, arrow_schema

from .ansi import strip_ansi
from .inferred_time import infer_missing, mark

if TYPE_CHECKING:
    from .contract import SourceContext

_CONTEXT_FIELDS = ("host", "ip")
_TEXT_FIELDS = ("msg", "exc")


def field_type(name: str) -> pa.DataType:
    return arrow_schema().field(name).type


@lru_cache(maxsize=1)
def empty_batch() -> pa.RecordBatch:
    """A batch with no rows (immutable, so one is shared)."""
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in arrow_schema()], schema=arrow_schema())


def build_batch(ctx: SourceContext, base_offset: int, starts: Sequence[int] | np.ndarray,
                columns: Mapping[str, pa.Array | None], read_time_ns: int, *, infer_time: bool = True) -> pa.RecordBatch:
    """One RecordBatch of `len(starts)` records; `starts` are the records' positions in the buffer.

    With `infer_time` False a missing `ts` stays null: the caller merges this batch with others of
    the same file and infers times over the merged order (:func:`with_inferred_time`)."""
    batch = build_batch_many([(ctx, base_offset, len(starts))], starts, columns)
    return with_inferred_time(batch, ctx, read_time_ns) if infer_time else batch


def build_batch_many(segments: Sequence[tuple[SourceContext, int, int]], starts: Sequence[int] | np.ndarray,
                     columns: Mapping[str, pa.Array | None]) -> pa.RecordBatch:
    """:func:`build_batch` of rows from one or several files' reads (:func:`ranklog.parse.parse_many`):
    `segments` are (ctx, base offset, rows) of consecutive runs of rows, the base offset being what
    turns a row's position in the buffer into its offset in its file. Each row gets its own file's
    context; missing times stay null (:func:`with_inferred_time`, per file)."""
    n = len(starts)
    if n == 0:
        return empty_batch()
    ctxs = [ctx for ctx, _, _ in segments]
    counts = np.array([rows for _, _, rows in segments], dtype=np.int64)
    out: dict[str, pa.Array] = {}
    for name in FIELDS:
        kind = field_type(name)
        column = columns.get(name)
        if column is not None and len(column) != n:
            raise ValueError(f"column {name} has {len(column)} values for {n} records")
        if name == "offset":
            bases = segments[0][1] if len(segments) == 1 else np.repeat(
                np.array([base for _, base, _ in segments], dtype=np.int64), counts)
            out[name] = pa.array(np.asarray(starts, dtype=np.int64) + bases, pa.int64())
            continue
        if name == "attrs":
            out[name] = _merge_attrs_many(column, ctxs, counts, n)
            continue
        if name in ("source", "source_id"):
            out[name] = _per_row([getattr(ctx, name) for ctx in ctxs], counts, pa.string())
            continue
        column = _typed(column, kind, n)
        if name == "level":
            column = pc.fill_null(column, "UNKNOWN")
        elif name == "msg":
            column = strip_ansi(pc.fill_null(column, ""))
        elif name == "exc":
            column = strip_ansi(column)
        elif name == "format":
            column = _fill(column, [ctx.format for ctx in ctxs], counts, kind)
        elif name in _CONTEXT_FIELDS:
            column = _fill(column, [getattr(ctx, name) or "unknown" for ctx in ctxs], counts, kind)
        else:
            column = _fill(column, [(ctx.fields or {}).get(name) for ctx in ctxs], counts, kind)
        out[name] = column
    return pa.RecordBatch.from_arrays([out[name] for name in FIELDS], schema=arrow_schema())


def _per_row(values: Sequence[Any], counts: np.ndarray, kind: pa.DataType) -> pa.Array:
    """Each of `values` repeated its count of rows (typed as `kind`)."""
    if len(set(values)) == 1:
        return pa.repeat(pa.scalar(values[0], kind), int(counts.sum()))
    index = pa.array(np.repeat(np.arange(len(values), dtype=np.int32), counts))
    return pa.array(values, kind).take(index)


def _fill(column: pa.Array, values: Sequence[Any], counts: np.ndarray, kind: pa.DataType) -> pa.Array:
    """`column`'s nulls filled with each row's own default (None: left null), cast to the field's type."""
    if all(value is None for value in values):
        return column
    if len(values) == 1 or len(set(map(repr, values))) == 1:
        return column if column.null_count == 0 else pc.fill_null(column, _scalar(values[0], kind))
    defaults = [None if value is None else _scalar(value, kind).as_py() for value in values]
    return pc.coalesce(column, _per_row(defaults, counts, kind))


def _scalar(value: Any, kind: pa.DataType) -> pa.Scalar:
    """A default as a scalar of the field's type (a string one directly: a scalar cast costs ~30 µs)."""
    return pa.scalar(value, kind) if kind == pa.string() and isinstance(value, str) else pa.scalar(value).cast(kind)


def _merge_attrs_many(column: pa.Array | None, ctxs: Sequence[SourceContext], counts: np.ndarray,
                      n: int) -> pa.Array:
    if len(ctxs) == 1 or not any(_layout(ctx.fields or {}) for ctx in ctxs):
        return _merge_attrs(column, ctxs[0].fields or {}, n)
    column = _merge_attrs(column, {}, n)
    pieces, at = [], 0
    for ctx, count in zip(ctxs, counts.tolist(), strict=True):
        pieces.append(_merge_attrs(column.slice(at, count), ctx.fields or {}, count))
        at += count
    return pa.concat_arrays(pieces)


def _typed(column: pa.Array | None, kind: pa.DataType, n: int) -> pa.Array:
    if column is None:
        return pa.nulls(n, kind)
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if column.type == kind:
        return column
    if kind in (pa.int32(), pa.int64()) and not pa.types.is_integer(column.type):
        return pa.nulls(n, kind) if pa.types.is_null(column.type) else column.cast(kind)
    return column.cast(kind)


def _merge_attrs(column: pa.Array | None, defaults: Mapping[str, Any], n: int) -> pa.Array:
    """attrs JSON text per row, with the layout's extra attributes (`attempt`, …) underneath."""
    layout = _layout(defaults)
    if column is None:
        column = pa.nulls(n, pa.string())
    elif isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    column = column.cast(pa.string())
    if not layout:
        return column
    layout_json = json.dumps(layout, separators=(",", ":"), ensure_ascii=False, default=str)
    if column.null_count == n:
        return pa.repeat(pa.scalar(layout_json, pa.string()), n)
    # a row's own JSON object with the layout's members in front: text joined column-wise, unless the
    # row names a layout key itself (its own value wins: merged as JSON) or is no object at all
    text = pc.fill_null(column, "{}")
    simple = pc.and_(pc.starts_with(text, "{"), pc.ends_with(text, "}"))
    for key in layout:
        simple = pc.and_(simple, pc.invert(pc.match_substring(text, json.dumps(str(key), ensure_ascii=False) + ":")))
    inner = pc.utf8_slice_codeunits(text, 1)
    joined = pc.binary_join_element_wise(layout_json[:-1], pc.if_else(pc.equal(inner, "}"), "", ","), inner, "")
    if pc.all(simple).as_py():
        return joined
    rows = np.flatnonzero(~np.asarray(simple))
    own = column.take(pa.array(rows)).to_pylist()
    fixed = pa.array([layout_json if value is None else _merge_one(layout, value) for value in own], pa.string())
    mask = np.zeros(n, dtype=bool)
    mask[rows] = True
    return pc.replace_with_mask(joined, pa.array(mask), fixed)


def _layout(defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The layout's attributes that are not record fields (they go into attrs)."""
    return {k: v for k, v in defaults.items() if k not in _FIELD_SET and v is not None}


def _merge_one(layout: Mapping[str, Any], text: str) -> str:
    try:
        own = json.loads(text)
    except ValueError:
        own = {"attrs": text}
    if not isinstance(own, dict):
        own = {"attrs": own}
    return json.dumps({**layout, **own}, separators=(",", ":"), ensure_ascii=False, default=str)


def concat(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    """Batches in order as one batch (the parse result is a single batch)."""
    batches = [b for b in batches if b.num_rows]
    if not batches:
        return empty_batch()
    if len(batches) == 1:
        return batches[0]
    return pa.concat_batches(batches)


_FIELD_SET = frozenset(FIELDS) | frozenset(INT32_FIELDS) | frozenset(INT64_FIELDS)


def replace_columns(batch: pa.RecordBatch, columns: Mapping[str, pa.Array]) -> pa.RecordBatch:
    """`batch` with some columns replaced, keeping the record schema (and its non-null fields)."""
    arrays = [columns.get(name, batch.column(name)) for name in FIELDS]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema())


def with_inferred_time(batch: pa.RecordBatch, ctx: SourceContext, read_time_ns: int) -> pa.RecordBatch:
    """`batch` (in file order, built with ``infer_time=False``) with its missing times inferred."""
    if not batch.num_rows:
        return batch
    ts, inferred = infer_missing(batch.column("ts"), ctx, read_time_ns)
    if inferred is None:  # every record has its time (the state took the last one)
        return batch
    columns = {"ts": ts.cast(field_type("ts")), "attrs": mark(batch.column("attrs"), inferred)}
    return pa.RecordBatch.from_arrays([columns.get(name, batch.column(name)) for name in FIELDS], schema=arrow_schema())
