"""Level columns: normalising spellings in bulk, and guessing a level for free text."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ranklog.record import normalize_level

# Free text has no level field; these words are what people and libraries print. Checked in
# order, so "ERROR: ... warning" is an error. Lower-case words are left alone on purpose:
# "0 errors" or "error_rate" in a metrics line is not an error record.
_GUESSES: tuple[tuple[str, str], ...] = (
    ("CRITICAL", r"\b(?:CRITICAL|FATAL|PANIC)\b|\bSegmentation fault\b|\bcore dumped\b"),
    ("ERROR", r"\bERROR\b|\bError\b:|^Traceback \(most recent call last\):|^[A-Za-z_][\w.]*(?:Error|Exception): "),
    ("WARNING", r"\bWARN(?:ING)?\b|\bWarning\b:|^[A-Za-z_][\w.]*Warning: |^\S.*?:\d+: [A-Z]\w*Warning: "),
    ("DEBUG", r"\bDEBUG\b"),
    ("INFO", r"\bINFO\b"),
)


def normalize_levels(column: pa.Array) -> pa.Array:
    """Normalize every value (strings or numbers) through record.normalize_level, once per distinct value."""
    if pa.types.is_null(column.type):
        return pa.nulls(len(column), pa.string())
    encoded = pc.dictionary_encode(column)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    mapped = pa.array([normalize_level(value) for value in encoded.dictionary.to_pylist()], pa.string())
    return pc.take(mapped, encoded.indices)


def guess_levels(texts: pa.Array) -> pa.Array:
    """A level for each free-text line from its keywords; UNKNOWN when nothing says."""
    result = pa.nulls(len(texts), pa.string())
    for level, pattern in _GUESSES:
        hit = pc.fill_null(pc.match_substring_regex(texts, pattern), False)
        result = pc.if_else(pc.and_(hit, pc.is_null(result)), level, result)
    return pc.fill_null(result, "UNKNOWN")
