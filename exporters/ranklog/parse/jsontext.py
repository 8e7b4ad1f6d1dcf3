"""Building JSON object text column-wise with Arrow kernels (attrs of millions of rows without a Python loop).

A value is rendered only when its text is certain to be exact JSON; otherwise the member is null and
the caller renders that row in Python. See :func:`json_member`.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..record import attrs_object
from .arrowbytes import values_contain

_NEEDS_ESCAPE = r'[\x00-\x1f"\\]'
_POINT_ZERO = pa.scalar(".0", pa.string())


def json_member(name: str, column: pa.Array, whole_as_int: pa.Array | None = None) -> pa.Array | None:
    """`"name":value` per row; null where the value is null or only Python can spell it exactly.

    Returns None for a column that cannot be rendered at all: nested values, and timestamps that
    type inference made of strings (the line's own spelling is needed). A whole number in a column
    of doubles is spelled as the line wrote it, which the reader forgets (it makes one column of
    doubles of 20 and 2.5, and of 6.0): `whole_as_int` says per row whether the line wrote an integer
    (True: ``20``) or a point or exponent (False: ``6.0``, as Python spells the double); where it is
    null or not given, the row is left to Python.
    """
    kind = column.type
    key = pa.scalar(json.dumps(name, ensure_ascii=False) + ":", pa.string())
    empty = pa.scalar("", pa.string())
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        text = column.cast(pa.string())
    elif pa.types.is_floating(kind):
        values = np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float64)  # nulls: NaN
        magnitude = np.abs(values)
        # Arrow and Python switch to exponent notation at different magnitudes; huge doubles may be
        # integers the reader rounded: such rows are left to Python.
        fraction = np.isfinite(values) & (magnitude >= 1e-4) & (magnitude < 1e9) & (values != np.floor(values))
        text = pc.if_else(pa.array(fraction), column.cast(pa.string()), _NULL)
        if whole_as_int is not None:  # (-0.0 left to Python: its sign is lost on the way through int64)
            whole = (magnitude < 1e9) & (values == np.floor(values)) & ~((values == 0) & np.signbit(values))
            digits = column.cast(pa.int64(), safe=False).cast(pa.string())
            as_int = pa.array(whole & np.asarray(pc.fill_null(whole_as_int, False), dtype=bool))
            as_float = pa.array(whole & np.asarray(pc.fill_null(pc.invert(whole_as_int), False), dtype=bool))
            text = pc.if_else(as_int, digits, pc.if_else(as_float, pc.binary_join_element_wise(digits, _POINT_ZERO, empty),
                                                         text))
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        plain = pc.invert(pc.fill_null(pc.match_substring_regex(column, _NEEDS_ESCAPE), True))
        text = pc.if_else(plain, pc.binary_join_element_wise(_QUOTE, column, _QUOTE, empty), _NULL)
    else:
        return None
    return pc.binary_join_element_wise(key, text, empty)


def join_members(pieces: list[pa.Array], n: int) -> pa.Array:
    """`{member,member,…}` per row from json_member pieces; null where a row has no member.

    (Not ``binary_join_element_wise(..., null_handling="skip")``: in pyarrow 26 it drops the rows
    where every input is null, returning a shorter column.)
    """
    if not pieces:
        return pa.nulls(n, pa.string())
    empty = pa.scalar("", pa.string())
    with_commas = [pc.fill_null(pc.binary_join_element_wise(piece, _COMMA, empty), empty) for piece in pieces]
    joined = pc.utf8_rtrim(pc.binary_join_element_wise(*with_commas, empty), characters=",")
    return pc.if_else(pc.equal(joined, empty), pa.scalar(None, pa.string()),
                      pc.binary_join_element_wise(_OPEN, joined, _CLOSE, empty))


PARSE_ERROR_KEY = "parse_error"
UNUSABLE_NOTE = "unusable value in: "  # attrs.parse_error of a record kept with a field it could not use


def unusable_members(raw: dict[str, pa.Array], converted: dict[str, pa.Array]) -> list[pa.Array]:
    """attrs members for values a line carried that its field cannot hold (a time that is not one or
    out of range, an integer beyond its type): the text as written under the field's name, and
    ``parse_error`` naming the fields. Empty when every value converted."""
    lost = {name: pc.and_(raw[name].is_valid(), converted[name].is_null())
            for name in converted if name in raw and converted[name].null_count > raw[name].null_count}
    if not lost:
        return []
    pieces = [_exact_member(name, pc.if_else(mask, raw[name].cast(pa.string()), _NULL)) for name, mask in lost.items()]
    empty = pa.scalar("", pa.string())
    names = [pc.if_else(mask, pa.scalar(name + ", ", pa.string()), empty) for name, mask in lost.items()]
    listed = pc.utf8_rtrim(pc.binary_join_element_wise(*names, empty), characters=", ")
    note = pc.if_else(pc.equal(listed, empty), _NULL, pc.binary_join_element_wise(UNUSABLE_NOTE, listed, empty))
    pieces.append(json_member(PARSE_ERROR_KEY, note))
    return [p if p is not None else pa.nulls(len(note), pa.string()) for p in pieces]


def _exact_member(name: str, column: pa.Array) -> pa.Array:
    """json_member, with the rows it leaves to Python (text that needs escaping) rendered here."""
    piece = json_member(name, column)
    missing = pc.and_(column.is_valid(), piece.is_null())
    if not pc.any(missing).as_py():
        return piece
    key = json.dumps(name, ensure_ascii=False) + ":"
    rendered = [None if text is None else key + json.dumps(text, ensure_ascii=False) for text in column.to_pylist()]
    return pc.if_else(missing, pa.array(rendered, pa.string()), piece)


def note_unusable(attrs: str | None, names: list[str]) -> str:
    """One row's attrs JSON with the parse_error note for `names` added (Python-path twin of
    :func:`unusable_members`; the values themselves are already in attrs)."""
    own = attrs_object(attrs)
    own[PARSE_ERROR_KEY] = UNUSABLE_NOTE + ", ".join(names)
    return json.dumps(own, ensure_ascii=False, separators=(",", ":"), default=str)


def count_unusable(attrs: pa.Array | None) -> int:
    """Records whose attrs carry an :func:`unusable_members` note (the parse-error count)."""
    if attrs is None or attrs.null_count == len(attrs):
        return 0
    if not values_contain(attrs, f'"{PARSE_ERROR_KEY}":"{UNUSABLE_NOTE}'.encode()):
        return 0  # (one memchr pass: most records carry attrs, tz_assumed at least, and no note)
    return int(pc.sum(pc.match_substring(attrs, f'"{PARSE_ERROR_KEY}":"{UNUSABLE_NOTE}')).as_py() or 0)


_COMMA = pa.scalar(",", pa.string())
_QUOTE = pa.scalar('"', pa.string())
_NULL = pa.scalar(None, pa.string())
_OPEN = pa.scalar("{", pa.string())
_CLOSE = pa.scalar("}", pa.string())
