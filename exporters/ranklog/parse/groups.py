"""``pyarrow.compute.extract_regex`` for line layouts, without matching the message twice.

Layouts end in ``(?P<msg>.*)$``: the message is the rest of the line. On a line (no newline in it)
that tail always matches whatever the head matched, so it decides nothing, yet RE2 walks it byte by
byte and copies it — about half of the extraction's cost on ordinary log lines. Here the tail is
replaced by an empty group that marks where it starts (``extract_regex_span``: byte offsets, no
copies), and every group is then cut out of the lines with one ``take`` each.

The answer is ``extract_regex``'s: the head's leftmost-first match is the same with either tail (the
tail accepts every rest), a group that took no part is ``""``, a line that does not match is null.

The cut-out costs ~0.2 ms a call more than ``extract_regex`` whatever the rows (a second pattern
compiled, a ``take`` a group); it pays from ~1,000 lines on (measured on Ray's and Python logging's
lines: 0.34× / 0.29× as fast on 1 line, 0.62× / 0.51× on 200, 1.07× / 0.76× on 1,000, 1.53× /
1.18× on 8,000), so fewer lines than that (a trickle's read, a round's joined reads, the few lines
a later layout matches) go to ``extract_regex`` itself.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .arrowbytes import value_offsets, values_contain

_TAIL = re.compile(r"\(\?P<(?P<name>\w+)>\.\*\)\$$")


MIN_ROWS = 1000  # below this, extract_regex itself is cheaper (see the module docstring)


def extract_groups(texts: pa.Array, pattern: str) -> pa.StructArray:
    """``pc.extract_regex(texts, pattern)``, cheaper when `pattern` ends in ``(?P<name>.*)$``."""
    tail = _TAIL.search(pattern) if len(texts) >= MIN_ROWS else None
    if tail is None or not _plain_lines(texts):
        return pc.extract_regex(texts, pattern)
    rest = tail.group("name")
    spans = pc.extract_regex_span(texts, f"{pattern[: tail.start()]}(?P<{rest}>)")
    names = [spans.type.field(i).name for i in range(spans.type.num_fields)]
    starts = value_offsets(texts)
    children = [_cut(texts, starts, spans.field(name), to_end=name == rest) for name in names]
    return pa.StructArray.from_arrays(children, names=names, mask=spans.is_null())


def _plain_lines(texts: pa.Array) -> bool:
    """A non-empty string array (int32 offsets) of lines: no value holds a newline (`.` stops there)."""
    return (isinstance(texts, pa.StringArray) and len(texts) > 0 and texts.buffers()[2] is not None
            and not values_contain(texts, b"\n"))


def _cut(texts: pa.StringArray, starts: np.ndarray, span: pa.FixedSizeListArray, *, to_end: bool) -> pa.Array:
    """The group's text per row ("" where it took no part): `span` (offset, length) within each value,
    or from the offset to the value's end when `to_end`."""
    n = len(texts)
    pairs = span.values.slice(2 * span.offset, 2 * n).fill_null(0).to_numpy().reshape(n, 2)
    begin = starts[:-1] + pairs[:, 0]
    end = np.where(span.is_valid().to_numpy(zero_copy_only=False), starts[1:] if to_end else begin + pairs[:, 1], begin)
    bounds = np.empty(2 * n + 1, dtype=np.int32)  # value 2i is row i's group, value 2i+1 the gap after it
    bounds[0:-1:2], bounds[1::2], bounds[-1] = begin, end, end[-1]
    pieces = pa.Array.from_buffers(pa.string(), 2 * n, [None, pa.py_buffer(bounds), texts.buffers()[2]])
    return pieces.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)))
