"""Log queries answered as Loki streams, and the label sets of the label and series endpoints.

A *stream* is a set of stream labels (:mod:`.labels`). With ``X-Loki-Response-Encoding-Flags:
categorize-labels`` (what Grafana 11/12 sends) an entry is ``[ts, line, {"structuredMetadata":
{…}, "parsed": {…}}]`` under its stream labels; without it, structured metadata and parsed labels
are folded into the stream labels, so entries that differ in them are separate streams — both as
Loki does (pkg/util/marshal/query.go, pkg/logql/engine.go readStreams). Timestamps leave as
nanosecond strings.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...query import budget
from ...query.logql.labels import ENTRY_COLUMNS, STREAM_COLUMNS, STREAM_LABELS, Labels, stream_of
from ...query.logql.syntax import LogSelector
from . import entries

if TYPE_CHECKING:
    from .pipeline import Entry

LINE_COLUMNS = list(ENTRY_COLUMNS)
ENTRY_OVERHEAD_BYTES = 256  # Python objects around an entry's strings, for the memory budget
to_spec = entries.to_spec


@dataclass
class Streams:
    streams: list[dict[str, Any]]
    entries: int


def select_entries(source: Any, selector: LogSelector, start_ns: int, end_ns: int, limit: int,
                   forward: bool) -> list[Entry]:
    """The oldest (forward) or newest (backward) `limit` entries that pass the whole pipeline."""
    if selector.never or limit == 0:
        return []
    query_plan = entries.ordered(entries.plan(selector, start_ns, end_ns), forward)
    if not query_plan.stages and query_plan.batch_filter is None:  # the scan's limit is the answer's
        query_plan = dataclasses.replace(query_plan, spec=dataclasses.replace(query_plan.spec, limit=limit))
    running = budget.current()
    found: list[Entry] = []
    held = 0
    selected = entries.entries(source, query_plan, LINE_COLUMNS)
    try:
        for entry in selected:
            found.append(entry)
            if running is not None:
                size = len(entry.line) + ENTRY_OVERHEAD_BYTES + sum(len(k) + len(v) for k, v in entry.meta.items())
                held += size
                running.charge(size, "log lines of the answer")
            if len(found) >= limit:
                break
    finally:
        selected.close()
        if running is not None:
            running.release(held)
    return found


def count_entries(source: Any, selector: LogSelector, start_ns: int, end_ns: int) -> int:
    """How many entries pass the whole pipeline (from Parquet statistics when the scan decides alone)."""
    from ...query import engine

    if selector.never:
        return 0
    query_plan = entries.plan(selector, start_ns, end_ns)
    if not query_plan.stages and query_plan.batch_filter is None:
        return engine.count(source, query_plan.spec)
    return sum(1 for _ in entries.entries(source, query_plan, LINE_COLUMNS))


def streams_of(found: list[Entry], categorize: bool) -> list[dict[str, Any]]:
    """Entries grouped into Loki streams (see the module docstring), streams in label order."""
    grouped: dict[Labels, list[list[Any]]] = {}
    for entry in found:
        if categorize:
            key = tuple(sorted(entry.stream.items()))
            extra: dict[str, dict[str, str]] = {}
            if entry.meta:
                extra["structuredMetadata"] = dict(sorted(entry.meta.items()))
            if entry.parsed:
                extra["parsed"] = dict(sorted(entry.parsed.items()))
            grouped.setdefault(key, []).append([str(entry.ts), entry.line, extra])
        else:
            key = tuple(sorted(entry.all_labels().items()))
            grouped.setdefault(key, []).append([str(entry.ts), entry.line])
    return [{"stream": dict(labels), "values": values} for labels, values in sorted(grouped.items())]


def log_streams(source: Any, selector: LogSelector, start_ns: int, end_ns: int, limit: int, forward: bool,
                categorize: bool = False) -> Streams:
    found = select_entries(source, selector, start_ns, end_ns, limit, forward)
    return Streams(streams_of(found, categorize), len(found))


# -- label sets -------------------------------------------------------------------------------------
def distinct_label_sets(source: Any, selector: LogSelector, start_ns: int, end_ns: int,
                        names: tuple[str, ...] = STREAM_LABELS) -> set[Labels]:
    """The distinct label sets (restricted to `names`) of the matching entries' streams."""
    if selector.never:
        return set()
    query_plan = entries.plan(selector, start_ns, end_ns)
    wanted = set(names)
    found: set[Labels] = set()
    if query_plan.stages:  # a pipeline decides per entry
        for entry in entries.entries(source, query_plan, LINE_COLUMNS):
            found.add(tuple((k, v) for k, v in sorted(entry.stream.items()) if k in wanted))
        return found
    import pyarrow as pa

    for batch in entries.batches(source, query_plan, list(STREAM_COLUMNS)):
        unique = pa.Table.from_batches([batch]).group_by(list(STREAM_COLUMNS), use_threads=False).aggregate([])
        columns = [unique.column(name).to_pylist() for name in STREAM_COLUMNS]
        for job, host, rank, level, fmt in zip(*columns, strict=True):
            labels = stream_of(job, host, rank, level, fmt)
            found.add(tuple((k, v) for k, v in sorted(labels.items()) if k in wanted))
    return found
