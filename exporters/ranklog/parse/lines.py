"""Splitting a byte buffer into complete lines with exact byte offsets, and decoding them to Arrow.

Offsets are positions in the *raw bytes* (the idempotency key), so lines are found on bytes with
numpy and decoded afterwards; invalid UTF-8 is replaced, never fatal.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .ansi import strip_ansi

# A line longer than this with no newline in sight is cut here so a writer that never ends its
# line cannot make the reader buffer forever; the piece is marked in attrs by the caller.
DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024
_WHITESPACE = frozenset(b" \t\r\n\f\v")


@dataclass
class Lines:
    """Complete lines of a buffer: `starts[i]`..`ends[i]` (newline and trailing CR excluded)."""

    starts: np.ndarray  # int64 positions in the buffer
    ends: np.ndarray  # int64 positions in the buffer, exclusive, without "\r\n"
    consumed: int  # bytes covered by these lines, newlines included
    cut: bool  # the last line was cut at max_line_bytes (no newline yet)

    def __len__(self) -> int:
        return len(self.starts)


def split_lines(data: bytes, *, final: bool, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Lines:
    """The complete lines of `data`; with `final`, a trailing line without newline counts too."""
    buf = np.frombuffer(data, dtype=np.uint8)
    newlines = np.flatnonzero(buf == 10).astype(np.int64)
    consumed = int(newlines[-1]) + 1 if len(newlines) else 0
    cut = False
    if consumed < len(data) and (final or len(data) - consumed >= max_line_bytes):
        if final:
            tail_end = len(data)
        else:
            tail_end = consumed + max_line_bytes
            cut = True
        ends = np.append(newlines, tail_end)
        consumed = tail_end
    else:
        ends = newlines
    starts = np.empty(len(ends), dtype=np.int64)
    if len(ends):
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
    # Exclude one trailing carriage return (CRLF files); the newline is already excluded.
    content_ends = ends.copy()
    nonempty = content_ends > starts
    if nonempty.any():
        last = np.where(nonempty, content_ends - 1, 0)
        content_ends -= (nonempty & (buf[last] == 13)).astype(np.int64)
    return Lines(starts=starts, ends=content_ends, consumed=consumed, cut=cut)


def blank_mask(data: bytes, lines: Lines) -> np.ndarray:
    """True for lines holding only whitespace (they carry no record)."""
    length = lines.ends - lines.starts
    blank = length == 0
    if not len(lines):
        return blank
    buf = np.frombuffer(data, dtype=np.uint8)
    first = buf[np.where(length > 0, lines.starts, 0)] if len(buf) else np.zeros(len(lines), np.uint8)
    suspicious = (~blank) & np.isin(first, (32, 9, 12, 11, 13))
    for i in np.flatnonzero(suspicious):
        if not data[lines.starts[i]: lines.ends[i]].strip():
            blank[i] = True
    return blank


def decode_lines(data: bytes, lines: Lines, *, strip_colours: bool = True) -> pa.StringArray:
    """The lines as an Arrow string array: zero-copy when valid UTF-8, replaced per line otherwise."""
    n = len(lines)
    if n == 0:
        return pa.array([], pa.string())
    block = data[: lines.consumed]
    try:
        block.decode("utf-8")
        valid = True
    except UnicodeDecodeError:
        valid = False
    if valid and _contiguous(lines):
        offsets = np.append(lines.starts, lines.consumed).astype(np.int32 if lines.consumed < 2**31 else np.int64)
        kind = pa.string() if offsets.dtype == np.int32 else pa.large_string()
        raw = pa.Array.from_buffers(kind, n, [None, pa.py_buffer(offsets), pa.py_buffer(block)])
        texts = pc.utf8_rtrim(raw, characters="\r\n")
        if kind == pa.large_string():
            texts = texts.cast(pa.string())
    else:
        texts = pa.array(
            [data[s:e].decode("utf-8", "replace") for s, e in zip(lines.starts.tolist(), lines.ends.tolist(), strict=True)],
            pa.string(),
        )
    return strip_ansi(texts) if strip_colours else texts


def _contiguous(lines: Lines) -> bool:
    """Lines tile the block (always true for split_lines output; guards hand-built Lines)."""
    return bool(len(lines)) and lines.starts[0] == 0
