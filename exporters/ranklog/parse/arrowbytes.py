"""Byte-level checks on the value data of Arrow string arrays, to skip whole vectorized passes.

A ``memchr`` over a column's contiguous value bytes costs a small fraction of any compute kernel that
visits the values one by one (``match_substring``, ``replace_substring``, a regex), and in log data
the answer is almost always "absent" (no ESC byte, no comma in a timestamp), so the kernel is skipped.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def values_contain(column: pa.Array, needle: bytes) -> bool:
    """Whether the bytes of `column`'s values (only its slice's) hold `needle`.

    Exact for string / large_string / binary arrays: values sit back to back, so a hit may straddle two
    values (or a null slot's leftover bytes) — a false positive that only costs the caller its full
    pass, never a missed value. Other types answer True (the caller does its full pass).
    """
    kind = column.type
    if isinstance(column, pa.ChunkedArray):
        return any(values_contain(chunk, needle) for chunk in column.chunks)
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind)
            or pa.types.is_large_binary(kind)):
        return True
    if len(column) == 0:
        return False
    _, offsets_buf, data_buf = column.buffers()
    if data_buf is None or offsets_buf is None:
        return False
    width = np.int64 if (pa.types.is_large_string(kind) or pa.types.is_large_binary(kind)) else np.int32
    offsets = np.frombuffer(offsets_buf, dtype=width, count=column.offset + len(column) + 1)
    lo, hi = int(offsets[column.offset]), int(offsets[column.offset + len(column)])
    return data_buf.slice(lo, hi - lo).to_pybytes().find(needle) >= 0


def values_as_one(column: pa.Array) -> pa.Array:
    """The bytes of `column`'s values back to back, as a one-element string array (zero-copy).

    One regex search over it replaces one search per value (each a separate RE2 call): a pattern
    without anchors, word boundaries or lookarounds that finds nothing here matches no value. It may
    find a match straddling two values — a false positive the caller resolves per value.
    """
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    kind = column.type
    if len(column) == 0 or not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        return pa.array([""], pa.string())
    _, offsets_buf, data_buf = column.buffers()
    if data_buf is None or offsets_buf is None:
        return pa.array([""], pa.string())
    width = np.int64 if pa.types.is_large_string(kind) else np.int32
    offsets = np.frombuffer(offsets_buf, dtype=width, count=column.offset + len(column) + 1)
    span = np.array([offsets[column.offset], offsets[column.offset + len(column)]], dtype=np.int64)
    return pa.Array.from_buffers(pa.large_string(), 1, [None, pa.py_buffer(span), data_buf])
