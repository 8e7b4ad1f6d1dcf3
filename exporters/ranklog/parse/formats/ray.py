"""`ray` format: everything under a Ray session's ``logs/`` folder.

- Worker files ``worker-<worker_id>-<job_id>-<pid>.{out,err}``: the process's own stdout/stderr
  (prints, Python logging in any layout of :mod:`.python`, Ray's structured JSON lines when the job
  uses ``ray.LoggingConfig(encoding="JSON")``), with Ray's marker lines ``:actor_name:WorkerDict_0``
  / ``:task_name:f`` that say which actor or task the following lines belong to → ``role`` (kept in
  ``ctx.state["role"]`` across restarts). The marker lines stay records too (nothing is dropped).
- Driver output and ``job-driver-*.log``: worker lines forwarded with a ``(WorkerDict pid=123,
  ip=10.0.0.2)`` prefix → role (the actor class), pid and ip of the origin; each prefix is its own
  stream for multi-line grouping, so interleaved tracebacks stay whole.
- C++ components (``raylet``, ``gcs_server``, ``python-core-worker/driver``):
  ``[2025-10-01 08:00:00,123 I 1234 5678] (raylet) file.cc:42: msg`` → ts, level, pid, attrs tid/file.
- JSON lines (a line starting with ``{`` that parses as an object) are mapped like the ``json``
  format (Ray's keys: asctime/timestamp_ns, levelname, message, job_id, actor_name, …); a mixed file
  is split into runs of JSON and text lines, each parsed by its own path.
- A message that starts with ``[Rank N]`` (verl's workers, NCCL) was written by global rank N: a
  record without a rank of its own gets N. The other records of that process (its traceback, Ray's
  lines about it) get the rank in triage, joined by pid (:mod:`ranklog.triage.identity`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..batch import concat, empty_batch, replace_columns
from ..contract import ParseResult
from ..json_bulk import parse_json_lines
from ..lines import blank_mask, split_lines
from ..text_layouts import Layout, TextFormat, parse_text_lines
from .json import build_mapping
from .python import PYTHON_LAYOUTS, RANK_PREFIX

if TYPE_CHECKING:
    from ..contract import SourceContext

RAY_CPP = Layout(
    "ray-cpp",
    r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[,.]\d+) (?P<level>[DIWEF]) (?P<pid>\d+) (?P<tid>\d+)\] "
    r"(?:\((?P<component>[\w\-]+)\) )?(?P<file>[\w./\-]+:\d+): (?P<msg>.*)$",
)
DRIVER_PREFIX = r"\((?:(?P<role>[^\s()=,]+) )?pid=(?P<pid>\d+)(?:, ip=(?P<ip>[0-9A-Fa-f.:]+))?[^)]*\) ?"
MESSAGE_RANK = r"^\[Rank (?P<rank>\d{1,6})\]"
RAY = TextFormat(layouts=(RAY_CPP, *PYTHON_LAYOUTS), prefixes=(DRIVER_PREFIX, RANK_PREFIX), markers=True)


def parse_ray(data: bytes, base_offset: int, ctx: SourceContext, *, final: bool, read_time_ns: int) -> ParseResult:
    runs = _json_runs(data, final=final, max_line=int(ctx.options.get("max_line_bytes", 16 * 1024 * 1024)))
    if runs is None:
        result = parse_text_lines(data, base_offset, ctx, final=final, read_time_ns=read_time_ns, fmt=RAY)
        return ParseResult(with_message_rank(result.batch), result.consumed, result.errors)
    batches, errors, consumed = [], 0, 0
    mapping = build_mapping(ctx.options.get("mapping"))
    for start, end, is_json, last in runs:
        chunk = data[start:end]
        if is_json:
            result = parse_json_lines(chunk, base_offset + start, ctx, final=True, read_time_ns=read_time_ns,
                                      mapping=mapping)
            result.batch = _with_marker_state(result.batch, ctx.state)
        else:
            result = parse_text_lines(chunk, base_offset + start, ctx, final=final or not last,
                                      read_time_ns=read_time_ns, fmt=RAY)
        batches.append(result.batch)
        errors += result.errors
        consumed = start + result.consumed
        if result.consumed < len(chunk):
            break
    return ParseResult(with_message_rank(concat(batches)) if batches else empty_batch(), consumed, errors)


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


def _json_runs(data: bytes, *, final: bool, max_line: int) -> list[tuple[int, int, bool, bool]] | None:
    """Runs of consecutive JSON-object lines and text lines: (start, end, is_json, is_last), or None
    when there is no JSON line at all (the common case: plain text)."""
    if b"\n{" not in data and not data.startswith(b"{"):
        return None
    lines = split_lines(data, final=final, max_line_bytes=max_line)
    if not len(lines):
        return None
    buf = np.frombuffer(data, dtype=np.uint8)
    nonempty = lines.ends > lines.starts
    first = np.where(nonempty, buf[np.minimum(lines.starts, max(len(buf) - 1, 0))], 0)
    is_json = nonempty & (first == ord("{"))
    blank = blank_mask(data, lines)
    if not is_json.any():
        return None
    # blank lines join the run before them; a run is text when a non-blank line of it is not JSON
    kind = np.where(blank, -1, is_json.astype(np.int8))
    for i in range(1, len(kind)):
        if kind[i] == -1:
            kind[i] = kind[i - 1]
    if kind[0] == -1:
        kind[0] = 0
    bounds = np.flatnonzero(np.diff(kind)) + 1
    starts = [0, *bounds.tolist()]
    ends = [*bounds.tolist(), len(kind)]
    runs = []
    for k, (a, b) in enumerate(zip(starts, ends, strict=True)):
        end = int(lines.starts[b]) if b < len(kind) else lines.consumed
        runs.append((int(lines.starts[a]), end, bool(kind[a] == 1), k == len(starts) - 1))
    return runs


def _with_marker_state(batch: pa.RecordBatch, state: dict) -> pa.RecordBatch:
    """JSON lines after a marker line belong to that actor/task too (their own keys win)."""
    filled = {name: pc.fill_null(batch.column(name), state[name])
              for name in ("role", "job") if state.get(name) is not None and batch.num_rows}
    return replace_columns(batch, filled) if filled else batch


PARSERS = {"ray": parse_ray}
