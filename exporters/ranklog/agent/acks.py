"""Acknowledgement watermarks: a file's checkpoint advances only over a gap-free run of acked chunks.

Requests may be acknowledged out of order (several in flight, fail-over between archives), so each
file keeps its chunks in offset order and the watermark moves forward only while the oldest chunk
is acknowledged.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Chunk:
    """Bytes [start, end) of one file, parsed into `batch` (None or empty when they held no record)."""

    key: str  # source_id
    start: int
    end: int
    state: dict[str, Any]  # parser state after `end`
    batch: Any = None  # pyarrow.RecordBatch
    rows: int = 0
    acked: bool = field(default=False, repr=False)

    @property
    def nbytes(self) -> int:
        return self.end - self.start


class Watermark:
    """The in-flight chunks of one file and the offset up to which all of them are acknowledged."""

    def __init__(self, offset: int, state: dict[str, Any]) -> None:
        self.offset = offset
        self.state = state
        self._chunks: deque[Chunk] = deque()

    def add(self, chunk: Chunk) -> None:
        self._chunks.append(chunk)

    def ack(self, chunk: Chunk) -> bool:
        """Mark `chunk` acknowledged; True when the watermark moved."""
        chunk.acked = True
        moved = False
        while self._chunks and self._chunks[0].acked:
            done = self._chunks.popleft()
            self.offset, self.state = done.end, done.state
            moved = True
        return moved

    @property
    def pending(self) -> int:
        return len(self._chunks)
