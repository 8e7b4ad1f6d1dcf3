"""Text skip index: per Parquet row group, a bitmap of the byte trigrams in its `msg` and `exc`.

Why: a message search (``--regex`` / ``--contains``) otherwise decompresses every message of the
range, which costs more than ``grep`` reading raw JSONL (bench_query (c)). Compaction sorts an hour by
level first and cuts row groups at level changes, so the INFO bulk and the few ERROR rows sit in
different row groups; a search whose pattern has a required literal (query/literals.py) then skips
every row group that lacks one of the literal's trigrams without reading a byte of it — the idea of
ClickHouse's ``ngrambf_v1`` skip index.

Format: one bitmap per row group in the Parquet footer's key-value metadata under :data:`METADATA_KEY`,
``<u32 row groups>`` then per group ``<u8 log2 bits><bitmap bytes>``. A trigram (three bytes of the
UTF-8 text, read across value boundaries, which only adds bits) sets bit ``hash(t) >> (32 - log2
bits)``. The bitmap has the next power of two ≥ 2 × (distinct trigrams) bits (≤ 40 % full), so a
14-trigram literal that is absent passes for present with probability < 0.4^14 ≈ 3e-6, and the index
costs ≤ 4 bits per distinct trigram — a few KB per row group. It is sound by construction: every
trigram of every stored value sets its bit, so a row group is only skipped when no value in it can
hold the literal. Files without the key (flush files) are searched in full.
"""

from __future__ import annotations

import base64
import functools
import struct
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

METADATA_KEY = b"ranklog.text_index"
TEXT_COLUMNS = ("msg", "exc")
MIN_BITS_LOG2 = 10
_MULTIPLIER = 2654435761  # Knuth's multiplicative hash, 32 bits
_CHUNK_BYTES = 16 << 20  # bounds the temporary arrays, whatever the row group's size


def _trigrams(data: np.ndarray) -> np.ndarray:
    """The 24-bit trigram values of a uint8 array (len - 2 of them): each is the little-endian
    32-bit word at that byte, read through an unaligned strided view, without its top byte."""
    import numpy as np

    if len(data) < 4:
        return np.array([int.from_bytes(data[i:i + 3].tobytes(), "little") for i in range(len(data) - 2)], np.uint32)
    words = np.ndarray((len(data) - 3,), dtype="<u4", buffer=data, offset=0, strides=(1,))
    last = np.array([int.from_bytes(data[-3:].tobytes(), "little")], np.uint32)
    return np.concatenate([words & np.uint32(0xFFFFFF), last])


def _hash(trigrams: np.ndarray, bits_log2: int) -> np.ndarray:
    import numpy as np

    return ((trigrams.astype(np.uint64) * _MULTIPLIER) & 0xFFFFFFFF) >> (32 - bits_log2)


def string_values(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets of `array`'s values into its data, that data buffer as uint8), zero-copy; both
    empty when the array holds no bytes. Offsets are absolute: value i is data[offsets[i]:offsets[i+1]]."""
    import numpy as np
    import pyarrow as pa

    empty = (np.zeros(1, np.int64), np.empty(0, np.uint8))
    if len(array) == 0 or array.null_count == len(array):
        return empty
    large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    _, offsets_buffer, data_buffer = array.buffers()[:3]
    offsets = np.frombuffer(offsets_buffer, np.int64 if large else np.int32)[array.offset:array.offset + len(array) + 1]
    if data_buffer is None or offsets[-1] <= offsets[0]:
        return empty
    return offsets, np.frombuffer(data_buffer, np.uint8)


def _text_bytes(array: pa.Array) -> np.ndarray:
    """The UTF-8 bytes of a string array's values, back to back."""
    offsets, data = string_values(array)
    return data[int(offsets[0]):int(offsets[-1])]


def build(table: pa.Table) -> bytes:
    """The bitmap (with its size byte) of the trigrams in `table`'s text columns."""
    import numpy as np

    present = np.zeros(1 << 24, dtype=bool)  # exact set first: its size picks the bitmap's
    for name in TEXT_COLUMNS:
        if name not in table.schema.names:
            continue
        for chunk in table.column(name).chunks:
            data = _text_bytes(chunk)
            for start in range(0, len(data), _CHUNK_BYTES):
                piece = data[start:start + _CHUNK_BYTES + 2]  # overlap: no trigram lost at the seam
                if len(piece) >= 3:
                    present[_trigrams(piece)] = True
    distinct = np.flatnonzero(present)
    bits_log2 = max(MIN_BITS_LOG2, int(2 * len(distinct) - 1).bit_length())
    bitmap = np.zeros(1 << bits_log2, dtype=bool)
    bitmap[_hash(distinct, bits_log2)] = True
    return bytes([bits_log2]) + np.packbits(bitmap, bitorder="little").tobytes()


# Parquet key-value metadata is UTF-8 text by the format's spec (Polars refuses a footer that is
# not: "File out of specification: invalid utf8"), so the bitmaps are stored in base85 after this mark.
ENCODING_MARK = b"b85:"


def encode(bitmaps: Sequence[bytes]) -> bytes:
    return ENCODING_MARK + base64.b85encode(struct.pack("<I", len(bitmaps)) + b"".join(bitmaps))


def is_current(metadata: dict[bytes, bytes] | None) -> bool:
    """False for a footer whose index an older ranklog stored as raw bytes (not UTF-8)."""
    blob = (metadata or {}).get(METADATA_KEY)
    return blob is None or blob.startswith(ENCODING_MARK)


def decode(metadata: dict[bytes, bytes] | None) -> list[bytes] | None:
    """The per-row-group bitmaps of a file's key-value metadata, or None when it has no index."""
    blob = (metadata or {}).get(METADATA_KEY)
    if blob is None:
        return None
    if blob.startswith(ENCODING_MARK):
        try:
            blob = base64.b85decode(blob[len(ENCODING_MARK):])
        except ValueError:
            return None
    if len(blob) < 4:
        return None
    (count,), position, bitmaps = struct.unpack_from("<I", blob), 4, []
    for _ in range(count):
        size = (1 << blob[position]) // 8
        bitmaps.append(blob[position:position + 1 + size])
        position += 1 + size
    return bitmaps if position == len(blob) else None  # a malformed index is ignored, never trusted


def may_contain(bitmap: bytes, literals: Iterable[bytes]) -> bool:
    """False only when some literal has a trigram the row group's text does not hold."""
    import numpy as np

    packed = np.frombuffer(bitmap, np.uint8, offset=1)
    for literal in literals:
        if len(literal) < 3:
            continue
        byte, bit = _positions(literal, bitmap[0])
        if not np.all((packed[byte] >> bit) & 1):
            return False
    return True


@functools.lru_cache(maxsize=256)
def _positions(literal: bytes, bits_log2: int) -> tuple[np.ndarray, np.ndarray]:
    """(byte, bit) of each of `literal`'s trigrams in a 2**bits_log2 bitmap; a search asks the same
    few questions of every row group."""
    import numpy as np

    positions = _hash(_trigrams(np.frombuffer(literal, np.uint8)), bits_log2)
    return positions >> 3, (positions & 7).astype(np.uint8)
