"""Several files' reads as one buffer of lines, and the batch built from it cut back into a result per
read: what :func:`ranklog.parse.parse_many` does for a format that can parse reads together.

A parse's set-up costs (RE2 compiles, the JSON reader, ~15 column conversions, the batch builder)
are paid once for all the reads joined. Only complete lines are joined, each read's as its own
parse would split them; a read whose last complete line has no newline (a final flush) is left to be
parsed alone, since joined it would run into the next read's first line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .batch import empty_batch, with_inferred_time
from .contract import ParseResult
from .inferred_time import note_last_times
from .lines import DEFAULT_MAX_LINE_BYTES, Lines, split_lines

if TYPE_CHECKING:
    import pyarrow as pa

    from .contract import SourceContext

Read = tuple[bytes, int, "SourceContext", bool]  # (data, base_offset, ctx, final)
# A format's last step on the records of several files' reads, (ctx, how many records) each, in
# order — on each read's own batch, or once on the joined batch: it must give the same rows both ways.
Finish = Callable[["pa.RecordBatch", list[tuple["SourceContext", int]]], "pa.RecordBatch"]


def unchanged(batch: pa.RecordBatch, files: list[tuple[SourceContext, int]]) -> pa.RecordBatch:
    return batch


def finished(result: ParseResult, ctx: SourceContext, finish: Finish) -> ParseResult:
    """A read parsed alone with the format's last step applied."""
    return ParseResult(finish(result.batch, [(ctx, result.batch.num_rows)]), result.consumed, result.errors)


@dataclass
class JoinedReads:
    reads: list[Read]
    splits: list[Lines]  # each read's own lines
    data: bytes  # their complete lines, one read after the other
    lines: Lines  # every line, as positions in `data`
    owner: np.ndarray  # line → index of its read
    bases: list[int]  # per read: its base offset minus its place in `data` (position → offset in its file)

    def line_ranges(self) -> list[tuple[int, int]]:
        """Per read, its lines' [first, end) in `lines`."""
        ends = np.cumsum([len(lines) for lines in self.splits]).tolist()
        return list(zip([0, *ends[:-1]], ends, strict=True))

    def segments(self, rows: np.ndarray) -> list[tuple[SourceContext, int, int]]:
        """(ctx, base, count) of each run of `rows` (line indices, ascending) of one read, in order:
        what :func:`.batch.build_batch_many` needs."""
        owners = self.owner[rows]
        runs = np.flatnonzero(np.diff(owners, prepend=-1))
        counts = np.diff(np.append(runs, len(rows)))
        return [(self.reads[k][2], self.bases[k], int(count))
                for k, count in zip(owners[runs].tolist(), counts.tolist(), strict=True)]

    def files(self, rows: list[int]) -> list[tuple[SourceContext, int]]:
        """(ctx, how many records) of each read, for `rows` records each: what a :data:`Finish` takes."""
        return [(ctx, count) for (_, _, ctx, _), count in zip(self.reads, rows, strict=True)]

    def results(self, batch: pa.RecordBatch, rows: list[int], errors: list[int], consumed: list[int],
                read_time_ns: int) -> list[ParseResult]:
        """`batch` (every read's records, in order, `rows` each) cut back into a result per read, with
        missing times inferred per file, for the files that miss one (each file's state taking its
        last time)."""
        contexts = [ctx for _, _, ctx, _ in self.reads]
        timed = note_last_times(batch.column("ts"), contexts, rows)
        out, at = [], 0
        for ctx, count, bad, used, whole in zip(contexts, rows, errors, consumed, timed, strict=True):
            own = batch.slice(at, count) if count else empty_batch()
            at += count
            out.append(ParseResult(own if whole else with_inferred_time(own, ctx, read_time_ns), used, bad))
        return out


def join_reads(reads: Sequence[Read]) -> tuple[list[int], list[int], JoinedReads | None]:
    """(indices of the reads to parse alone, indices of the joined ones, the joined reads or None)."""
    splits = [split_lines(data, final=final, max_line_bytes=max_line_bytes(ctx)) for data, _, ctx, final in reads]
    alone = [i for i, ((data, *_), lines) in enumerate(zip(reads, splits, strict=True))
             if lines.cut or (lines.consumed and data[lines.consumed - 1] != 10)]
    joined = sorted(set(range(len(reads))) - set(alone))
    if not joined:
        return alone, joined, None
    own = [splits[i] for i in joined]
    positions = np.cumsum([0] + [lines.consumed for lines in own[:-1]]).tolist()  # each read's place in `data`
    data = b"".join(reads[i][0][:lines.consumed] for i, lines in zip(joined, own, strict=True))
    lines = Lines(starts=np.concatenate([lines.starts + at for lines, at in zip(own, positions, strict=True)]),
                  ends=np.concatenate([lines.ends + at for lines, at in zip(own, positions, strict=True)]),
                  consumed=len(data), cut=False)
    owner = np.repeat(np.arange(len(joined)), [len(lines) for lines in own])
    bases = [reads[i][1] - at for i, at in zip(joined, positions, strict=True)]
    return alone, joined, JoinedReads([reads[i] for i in joined], own, data, lines, owner, bases)


def max_line_bytes(ctx: SourceContext) -> int:
    """A read's line limit (``max_line_bytes`` option; see :mod:`.lines`)."""
    return int(ctx.options.get("max_line_bytes", DEFAULT_MAX_LINE_BYTES))
