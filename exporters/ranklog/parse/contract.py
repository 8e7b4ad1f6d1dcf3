"""What a parser is handed and what it returns: the types every format and the machinery share.

The contract itself (offsets, what `consumed` means, `ctx.state`, `ctx.fields`, `ctx.options`) is
described in :mod:`ranklog.parse`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass
class SourceContext:
    source: str  # file path as the agent sees it
    source_id: str  # stable file identity (the agent computes it)
    format: str  # parser name, one of FORMATS
    host: str
    ip: str
    fields: dict[str, Any] = field(default_factory=dict)  # layout defaults: job, rank, local_rank, pid, role, + attrs
    state: dict[str, Any] = field(default_factory=dict)  # parser state persisted with the checkpoint (JSON)
    options: dict[str, Any] = field(default_factory=dict)  # mapping, regex, multiline limits, timezone
    mtime_ns: int | None = None  # the file's modification time: the time of lines in a file without any


@dataclass
class ParseResult:
    batch: pa.RecordBatch  # record.arrow_schema(), one row per record
    consumed: int  # bytes of `data` that belong to complete records
    errors: int  # lines kept as `text` records because they did not parse


@dataclass(frozen=True)
class Detected:
    format: str
    fields: dict[str, Any]  # layout defaults for SourceContext.fields (host too, when the layout names it)


# parser(data, base_offset, ctx, *, final, read_time_ns) -> ParseResult
Parser = Callable[..., ParseResult]
