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
    if isinstance(column, pa.ChunkedArray):
        return any(values_contain(chunk, needle) for chunk in column.chunks)
    if not _is_stringlike(column.type):
        return True
    if len(column) == 0:
        return False
    offsets, data_buf = _offsets_and_data(column)
    if data_buf is None:
        return False
    lo, hi = int(offsets[0]), int(offsets[-1])
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
    offsets, data_buf = _offsets_and_data(column)
    if data_buf is None:
        return pa.array([""], pa.string())
    span = np.array([offsets[0], offsets[-1]], dtype=np.int64)
    return pa.Array.from_buffers(pa.large_string(), 1, [None, pa.py_buffer(span), data_buf])


def value_offsets(column: pa.Array) -> np.ndarray:
    """The len+1 offsets (int64) of a string / binary array's slice into its data buffer."""
    return _offsets_and_data(column)[0]


def value_lengths(column: pa.Array) -> np.ndarray:
    """The byte length of each value of a string / binary array (from its offsets; nulls as stored)."""
    return np.diff(value_offsets(column))


def first_bytes(column: pa.Array) -> np.ndarray:
    """The first byte of each value of a string / binary array; 0 for empty values."""
    offsets, data = _offsets_and_data(column)
    if data is None or data.size == 0:
        return np.zeros(len(column), dtype=np.uint8)
    values = np.frombuffer(data, dtype=np.uint8)
    nonempty = offsets[1:] > offsets[:-1]
    return np.where(nonempty, values[np.where(nonempty, offsets[:-1], 0)], 0).astype(np.uint8)


def bytes_at(column: pa.Array, at: int) -> np.ndarray:
    """The byte at position `at` of each value of a string / binary array; 0 for shorter values."""
    offsets, data = _offsets_and_data(column)
    if data is None or data.size == 0:
        return np.zeros(len(column), dtype=np.uint8)
    values = np.frombuffer(data, dtype=np.uint8)
    long_enough = offsets[1:] - offsets[:-1] > at
    return np.where(long_enough, values[np.where(long_enough, offsets[:-1] + at, 0)], 0).astype(np.uint8)


def replace_byte(column: pa.Array, old: bytes, new: bytes) -> pa.Array:
    """``pc.replace_substring(column, old, new)`` for one ASCII byte by another, as one numpy pass over
    a copy of the value bytes (an ASCII byte is never part of a multi-byte UTF-8 character)."""
    if not (len(old) == len(new) == 1 and old.isascii() and new.isascii()) or not _is_stringlike(column.type):
        raise ValueError("replace_byte replaces one ASCII byte by another in a string / binary array")
    validity, offsets_buf, data_buf = column.buffers()
    if data_buf is None or data_buf.size == 0:
        return column
    values = np.frombuffer(data_buf, dtype=np.uint8).copy()
    values[values == old[0]] = new[0]
    return pa.Array.from_buffers(column.type, len(column), [validity, offsets_buf, pa.py_buffer(values)],
                                 null_count=column.null_count, offset=column.offset)


def _offsets_and_data(column: pa.Array) -> tuple[np.ndarray, pa.Buffer | None]:
    """The slice's len+1 offsets (int64) and the data buffer of a (large) string / binary array."""
    kind = column.type
    if not _is_stringlike(kind):
        raise TypeError(f"not a string or binary array: {kind}")
    _, offsets_buf, data_buf = column.buffers()
    if offsets_buf is None:  # an empty array
        return np.zeros(len(column) + 1, dtype=np.int64), data_buf
    width = np.int64 if (pa.types.is_large_string(kind) or pa.types.is_large_binary(kind)) else np.int32
    offsets = np.frombuffer(offsets_buf, dtype=width, count=column.offset + len(column) + 1)[column.offset:]
    return offsets.astype(np.int64), data_buf


def _is_stringlike(kind: pa.DataType) -> bool:
    return (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind)
            or pa.types.is_large_binary(kind))
