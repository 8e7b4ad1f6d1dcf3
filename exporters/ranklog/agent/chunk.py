"""The agent's unit of work: a byte range of one file, its parsed batch, and whether it is acknowledged.

Read and parsed by :mod:`.tracked_file`, shipped by :mod:`.ship`, acknowledged through
:mod:`.acks` (which advances the file's checkpoint over a gap-free run of them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Chunk:
    """Bytes [start, end) of one file, parsed into `batch` (None or empty when they held no record)."""

    key: str  # source_id
    start: int
    end: int
    state: dict[str, Any]  # parser state after `end`
    batch: Any = None  # pyarrow.RecordBatch (None when a parse worker sent `encoded` and `summary` instead)
    rows: int = 0
    encoded: bytes | None = None  # the batch as a compressed Arrow IPC message (ship.encode_message)
    summary: Any = None  # log_metrics.BatchSummary of the batch
    maybe_sent: bool = False  # an earlier agent process may have shipped these bytes (see agent.answers)
    acked: bool = field(default=False, repr=False)

    @property
    def nbytes(self) -> int:
        return self.end - self.start
