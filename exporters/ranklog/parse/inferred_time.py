"""Time for records whose line carries none: the nearest timestamped line of the same file.

A line without a timestamp (a ``print``, a console traceback, torchrun's summary) takes the time of
the nearest timestamped record before it in the same file — across parse calls too, through
``ctx.state["ts_last"]`` (persisted with the agent's checkpoint) — or, at the head of the file,
the first timestamped record after it in the same piece. A file (piece) with no timestamp at all
takes the file's modification time (``ctx.mtime_ns``), which is when its last line was written.
The time a line was *read* is never used while the file says anything better; it is the last
resort only when the modification time is unknown.

Every such record is marked in ``attrs``: ``"ts_inferred": "previous" | "next" | "mtime" |
"read"``, so ``ranklog integrity`` can count them and a reader can tell a measured time from an
inferred one.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..record import ts_array, ts_ns

if TYPE_CHECKING:
    from .contract import SourceContext

STATE_KEY = "ts_last"
ATTR = "ts_inferred"
PREVIOUS, NEXT, MTIME, READ = "previous", "next", "mtime", "read"


def infer_missing(ts: pa.Array, ctx: SourceContext, read_time_ns: int) -> tuple[pa.Array, pa.Array | None]:
    """(`ts` with its nulls filled, the ``ts_inferred`` reason per row or None when nothing was missing).

    `ts` is a timestamp array in file order; updates ``ctx.state[STATE_KEY]`` to the file's last
    measured time (nanoseconds, like ``mtime_ns`` and `read_time_ns`, whatever unit `ts` has).
    """
    n = len(ts)
    valid = ~np.asarray(ts.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    values = ts_ns(ts)
    previous = ctx.state.get(STATE_KEY)
    if valid.any():
        ctx.state[STATE_KEY] = int(values[np.flatnonzero(valid)[-1]])
    if valid.all():
        return ts, None
    idx = np.arange(n)
    last_valid = np.maximum.accumulate(np.where(valid, idx, -1))
    filled = values.copy()
    reason = np.full(n, None, dtype=object)
    has_prev = (~valid) & (last_valid >= 0)
    filled[has_prev] = values[last_valid[has_prev]]
    reason[has_prev] = PREVIOUS
    head = (~valid) & (last_valid < 0)
    if head.any():
        if previous is not None:
            filled[head], reason[head] = int(previous), PREVIOUS
        elif valid.any():
            filled[head], reason[head] = int(values[np.flatnonzero(valid)[0]]), NEXT
        elif getattr(ctx, "mtime_ns", None):
            filled[head], reason[head] = int(ctx.mtime_ns), MTIME
        else:
            filled[head], reason[head] = read_time_ns, READ
    return ts_array(filled), pa.array(reason, pa.string())


def note_last_times(ts: pa.Array, ctxs: list[SourceContext], counts: list[int]) -> list[bool]:
    """For rows of several files (`counts` rows each, in order): per file, whether every row of it has
    its time — then its state takes its last, as :func:`infer_missing` would (the others are left
    to it, unchanged)."""
    values = ts_ns(ts) if len(ts) else np.zeros(0, np.int64)
    missing = np.asarray(ts.is_null().to_numpy(zero_copy_only=False), dtype=bool) if ts.null_count else None
    timed, at = [], 0
    for ctx, count in zip(ctxs, counts, strict=True):
        at += count
        whole = missing is None or not missing[at - count:at].any()
        if whole and count:
            ctx.state[STATE_KEY] = int(values[at - 1])
        timed.append(whole)
    return timed


def mark(attrs: pa.Array | None, reasons: pa.Array, name: str = ATTR) -> pa.Array:
    """attrs JSON with ``"<name>": reason`` (``ts_inferred`` by default) added where `reasons` is not null.

    A row without attrs takes its reason's object, made once per distinct reason (a column of one zone
    or a few reasons); only the rows with an attrs object of their own are joined string by string."""
    if isinstance(reasons, pa.ChunkedArray):
        reasons = reasons.combine_chunks()
    if isinstance(attrs, pa.ChunkedArray):
        attrs = attrs.combine_chunks()
    marked = pc.is_valid(reasons)
    encoded = reasons.dictionary_encode()
    objects = pa.array([json.dumps({name: value}, separators=(",", ":"), ensure_ascii=False)
                        for value in encoded.dictionary.to_pylist()], pa.string())
    alone = objects.take(encoded.indices)  # null where the reason is
    if attrs is None or attrs.null_count == len(attrs):
        return alone if attrs is None else pc.if_else(marked, alone, attrs)
    own = pc.and_(marked, pc.invert(pc.fill_null(pc.equal(pc.utf8_trim_whitespace(attrs), "{}"), True)))
    out = pc.if_else(marked, alone, attrs)
    if not pc.any(own).as_py():
        return out
    rows = pc.indices_nonzero(own)
    theirs, why = attrs.take(rows), reasons.take(rows)
    key = pc.binary_join_element_wise(f'"{name}":"', why, '"', "")
    joined = pc.if_else(pc.starts_with(theirs, "{"),
                        pc.binary_join_element_wise(pc.binary_join_element_wise("{", key, ",", ""),
                                                    pc.utf8_slice_codeunits(theirs, 1), ""),  # the object without its "{"
                        pc.binary_join_element_wise("{", key, "}", ""))
    return pc.replace_with_mask(out, own, joined)


def mark_where(attrs: pa.Array | None, where: pa.Array, name: str, value: str) -> pa.Array:
    """:func:`mark` with one reason, `value`, on the rows where `where` is true (null: false)."""
    where = pc.fill_null(where, False)
    if attrs is None or attrs.null_count == len(attrs):  # (the usual text file: one object, one pass)
        alone = pa.scalar(json.dumps({name: value}, separators=(",", ":"), ensure_ascii=False), pa.string())
        return pc.if_else(where, alone, pa.scalar(None, pa.string()) if attrs is None else attrs)
    return mark(attrs, pc.if_else(where, pa.scalar(value, pa.string()), pa.scalar(None, pa.string())), name)
