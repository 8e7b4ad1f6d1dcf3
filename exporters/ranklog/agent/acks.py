"""Acknowledgement watermarks: a file's checkpoint advances only over a gap-free run of acked chunks.

Requests may be acknowledged out of order (several in flight, fail-over between archives), so each
file keeps its chunks in offset order and the watermark moves forward only while the oldest chunk
is acknowledged.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from .chunk import Chunk


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
