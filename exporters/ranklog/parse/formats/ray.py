"""`ray` format: everything under a Ray session's ``logs/`` folder.

- Worker files ``worker-<worker_id>-<job_id>-<pid>.{out,err}``: the process's own stdout/stderr
  (prints, Python logging in any layout, learned per file as in :mod:`.python`, Ray's structured JSON lines when the job
  uses ``ray.LoggingConfig(encoding="JSON")``), with Ray's marker lines ``:actor_name:WorkerDict_0``
  / ``:task_name:f`` that say which actor or task the following lines belong to → ``role`` (kept in
  ``ctx.state["role"]`` across restarts). The marker lines stay records too (nothing is dropped).
- Driver output and ``job-driver-*.log``: worker lines forwarded with a ``(WorkerDict pid=123,
  ip=10.0.0.2)`` prefix → role (the actor class), pid and ip of the origin; each prefix is its own
  stream for multi-line grouping, so interleaved tracebacks stay whole.
- C++ components (``raylet``, ``gcs_server``, ``python-core-worker/driver``):
  ``[2025-10-01 08:00:00,123 I 1234 5678] (raylet) file.cc:42: msg`` → ts, level, pid, attrs
  tid/component/file (a layout learned like any other).
- JSON lines (a line starting with ``{`` that parses as an object) are mapped like the ``json``
  format (Ray's keys: asctime/timestamp_ns, levelname, message, job_id, actor_name, …); a mixed file
  is split into runs of JSON and text lines, each parsed by its own path.
- A message that starts with ``[Rank N]`` (verl's workers, NCCL) was written by global rank N: a
  record without a rank of its own gets N. The other records of that process (its traceback, Ray's
  lines about it) get the rank in triage, joined by pid (:mod:`ranklog.triage.identity`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..batch import concat, empty_batch, replace_columns, with_inferred_time
from ..contract import ParseResult
from ..joined import Read, max_line_bytes
from ..json_bulk import parse_json_lines, parse_json_lines_many
from ..lines import split_lines
from ..multiline import INTERJECTION, LONG_INTERJECTION
from ..text_layouts import TextFormat, parse_text_lines, parse_text_lines_many
from .json import build_mapping

if TYPE_CHECKING:
    from ..contract import SourceContext

MESSAGE_RANK = r"^\[Rank (?P<rank>\d{1,6})\]"
RAY = TextFormat(layouts=(), markers=True, interjections=True, learn=True)


def parse_ray(data: bytes, base_offset: int, ctx: SourceContext, *, final: bool, read_time_ns: int) -> ParseResult:
    runs = _json_runs(data, final=final, max_line=max_line_bytes(ctx))
    if runs is None:
        result = parse_text_lines(data, base_offset, ctx, final=final, read_time_ns=read_time_ns, fmt=RAY)
        return ParseResult(with_message_rank(result.batch), result.consumed, result.errors)
    return _parse_mixed(data, base_offset, ctx, runs, final=final, read_time_ns=read_time_ns)


def parse_ray_many(reads: Sequence[Read], *, read_time_ns: int) -> list[ParseResult]:
    """:func:`parse_ray` of several files' reads: those without a JSON line (a worker's or a
    component's file) in one pass of the text engine, those of JSON lines only (a worker's file after
    its marker lines, when the job logs with ``ray.LoggingConfig(encoding="JSON")``) in one pass of
    the JSON reader, each mixed read alone."""
    kinds = [_read_kind(data, final, max_line_bytes(ctx)) for data, _, ctx, final in reads]
    results: dict[int, ParseResult] = {}
    for kind, parse_group in (("text", _parse_text_reads), ("json", _parse_json_reads)):
        members = [i for i, k in enumerate(kinds) if k == kind]
        if members:
            results.update(zip(members, parse_group([reads[i] for i in members], read_time_ns), strict=True))
    results.update((i, parse_ray(data, base, ctx, final=final, read_time_ns=read_time_ns))
                   for i, ((data, base, ctx, final), kind) in enumerate(zip(reads, kinds, strict=True)) if kind == "mixed")
    return [results[i] for i in range(len(reads))]


def _read_kind(data: bytes, final: bool, max_line: int) -> str:
    """``text`` (no JSON line), ``json`` (complete JSON lines only, the last ending in a newline) or
    ``mixed`` (anything else: parsed alone)."""
    runs = _json_runs(data, final=final, max_line=max_line)
    if runs is None:
        return "text"
    whole = len(runs) == 1 and runs[0].start == 0 and data[runs[0].end - 1:runs[0].end] == b"\n"
    return "json" if whole else "mixed"


def _parse_text_reads(reads: list[Read], read_time_ns: int) -> list[ParseResult]:
    return parse_text_lines_many(reads, read_time_ns=read_time_ns, fmt=RAY, finish=_message_rank)


def _parse_json_reads(reads: list[Read], read_time_ns: int) -> list[ParseResult]:
    """JSON-only reads as :func:`_parse_mixed` parses them: the JSON records take the role and job
    their file's marker lines left in its state (the line's own keys win)."""
    mapping = build_mapping(reads[0][2].options.get("mapping"))
    return parse_json_lines_many(reads, read_time_ns=read_time_ns, mapping=mapping, finish=_marked_json)


def _message_rank(batch: pa.RecordBatch, files: list[tuple[SourceContext, int]]) -> pa.RecordBatch:
    return with_message_rank(batch)


def _marked_json(batch: pa.RecordBatch, files: list[tuple[SourceContext, int]]) -> pa.RecordBatch:
    columns = {}
    counts = [count for _, count in files]
    for name in ("role", "job"):
        values = [ctx.state.get(name) for ctx, _ in files]
        if batch.num_rows and any(value is not None for value in values):
            per_row = pa.array(np.repeat(np.array(values, dtype=object), counts), pa.string())
            columns[name] = pc.coalesce(batch.column(name), per_row)
    return with_message_rank(replace_columns(batch, columns) if columns else batch)


FORWARDED_BATCH = 1000  # lines of one file Ray's log monitor forwards at once (LOG_MONITOR_NUM_LINES_TO_READ)


@dataclass
class _TextView:
    """The text lines of a mixed piece, each run of JSON lines replaced by one placeholder line, and
    where each piece of the view sits in the data (``(position in view, offset in data)``, ascending)."""

    text: bytes
    pieces: list[tuple[int, int]]
    placeholders: np.ndarray  # view positions of the placeholder lines

    @classmethod
    def of(cls, data: bytes, runs: list[_Run]) -> _TextView:
        parts, pieces, placeholders, at = [], [], [], 0
        for run in runs:
            if run.is_json:
                long = run.lines > FORWARDED_BATCH
                part = (LONG_INTERJECTION if long else INTERJECTION).encode() + b"\n"
                placeholders.append(at)
            else:
                part = data[run.start:run.end]
            pieces.append((at, run.start))
            parts.append(part)
            at += len(part)
        return cls(b"".join(parts), pieces, np.asarray(placeholders, dtype=np.int64))

    def data_offsets(self, positions: np.ndarray) -> np.ndarray:
        return _in_data(positions, [p for p, _ in self.pieces], [o for _, o in self.pieces])[0]


def _in_data(positions: np.ndarray, at: list[int], to: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Positions in a buffer joined from pieces of the data (piece k starts at `at[k]` there and at
    `to[k]` in the data): their offsets in the data, and which piece each is in."""
    at_, to_ = np.asarray(at, dtype=np.int64), np.asarray(to, dtype=np.int64)
    piece = np.searchsorted(at_, positions, side="right") - 1
    return positions - at_[piece] + to_[piece], piece


def _parse_mixed(data: bytes, base_offset: int, ctx: SourceContext, runs: list[_Run], *, final: bool,
                 read_time_ns: int) -> ParseResult:
    """A file mixing JSON and text lines, in one parse of its text and one of its JSON lines however
    often they alternate. A JSON line is a whole record of another writer: Ray's driver prints the
    workers' forwarded JSON lines while Python writes a traceback line by line to the same console.
    So the text is parsed with each run of JSON lines as one placeholder line (an interjection, see
    :mod:`..multiline`): a traceback open before the run goes on after it, unless the run is longer
    than one forwarded batch. The JSON lines take the role and job of the Ray marker lines before them
    (through their placeholder's record). Records come out in file order, missing times inferred over
    that order."""
    view = _TextView.of(data, runs)
    found = parse_text_lines(view.text, 0, ctx, final=final, read_time_ns=read_time_ns, fmt=RAY, infer_time=False)
    consumed = runs[-1].end
    if found.consumed < len(view.text):  # a text record is still open: it and every line after it wait
        consumed = int(view.data_offsets(np.asarray([found.consumed]))[0])
    text = found.batch
    at = text.column("offset").to_numpy() if text.num_rows else np.empty(0, np.int64)
    placeholder = np.isin(at, view.placeholders)
    if text.num_rows:
        text = replace_columns(text, {"offset": pa.array(view.data_offsets(at) + base_offset, pa.int64())})
    stand_ins = text.filter(pa.array(placeholder)) if placeholder.any() else None
    text = text.filter(pa.array(~placeholder)) if placeholder.any() else text
    json_runs = [run for run in runs if run.is_json and run.start < consumed]
    parsed = parse_json_lines(b"".join(data[r.start:r.end] for r in json_runs), 0, ctx, final=True,
                              read_time_ns=read_time_ns, mapping=build_mapping(ctx.options.get("mapping")),
                              infer_time=False)
    records = parsed.batch
    if records.num_rows:
        records = _placed_json(records, json_runs, stand_ins, base_offset)
    batches = [b for b in (text, records) if b.num_rows]
    batch = concat(batches) if batches else empty_batch()
    if batch.num_rows:
        batch = batch.take(pc.sort_indices(batch.column("offset")))
    return ParseResult(with_message_rank(with_inferred_time(batch, ctx, read_time_ns)), consumed,
                       found.errors + parsed.errors)


def _placed_json(batch: pa.RecordBatch, runs: list[_Run], stand_ins: pa.RecordBatch | None,
                 base_offset: int) -> pa.RecordBatch:
    """JSON records parsed from the runs joined: their offsets in the file, and the role and job their
    run's placeholder got from the marker lines before it (the line's own keys win)."""
    joined = np.cumsum([0, *(r.end - r.start for r in runs)])[:-1].tolist()
    offsets, which = _in_data(batch.column("offset").to_numpy(), joined, [r.start for r in runs])
    columns = {"offset": pa.array(offsets + base_offset, pa.int64())}
    if stand_ins is not None and stand_ins.num_rows:
        # every run before the cut has its placeholder record, in the same order
        take = pa.array(which, pa.int64())
        for name in ("role", "job"):
            columns[name] = pc.coalesce(batch.column(name), stand_ins.column(name).take(take))
    return replace_columns(batch, columns)


def with_message_rank(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Records without a rank whose message starts with ``[Rank N]`` get rank N."""
    rank = batch.column("rank")
    if not batch.num_rows or rank.null_count == 0:
        return batch
    found = pc.extract_regex(batch.column("msg"), MESSAGE_RANK).field("rank")
    named = pc.cast(pc.if_else(pc.equal(found, ""), None, found), pa.int32())
    if named.null_count == batch.num_rows:
        return batch
    return replace_columns(batch, {"rank": pc.coalesce(rank, named)})


class _Run(NamedTuple):
    start: int
    end: int
    is_json: bool
    lines: int


def _json_runs(data: bytes, *, final: bool, max_line: int) -> list[_Run] | None:
    """Runs of consecutive JSON-object lines and of other lines (blank lines among them: a blank line
    means something to the text, nothing to JSON), or None when there is no JSON line at all (the
    common case: plain text)."""
    if b"\n{" not in data and not data.startswith(b"{"):
        return None
    lines = split_lines(data, final=final, max_line_bytes=max_line)
    if not len(lines):
        return None
    buf = np.frombuffer(data, dtype=np.uint8)
    nonempty = lines.ends > lines.starts
    first = np.where(nonempty, buf[np.minimum(lines.starts, max(len(buf) - 1, 0))], 0)
    is_json = nonempty & (first == ord("{"))
    if not is_json.any():
        return None
    bounds = [0, *(np.flatnonzero(np.diff(is_json.astype(np.int8))) + 1).tolist(), len(is_json)]
    runs = []
    for a, b in itertools.pairwise(bounds):
        end = int(lines.starts[b]) if b < len(is_json) else lines.consumed
        runs.append(_Run(int(lines.starts[a]), end, bool(is_json[a]), b - a))
    return runs


PARSERS = {"ray": parse_ray}
PARSERS_MANY = {"ray": parse_ray_many}
