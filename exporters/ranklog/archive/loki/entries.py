"""Read the entries a log query selects: the scan its :class:`~ranklog.query.logql.spec.Plan` gives,
then the rest of the pipeline (:mod:`.pipeline`) line by line, only on the rows the scan kept.

A *line* is the record's ``msg``, followed by a newline and ``exc`` when the record carries a
traceback (the text ``ranklog query --regex`` searches).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ...query import budget, engine
from ...query.logql.labels import (
    DETECTED_LEVEL,
    DETECTED_LEVELS,
    METADATA_COLUMNS,
    STREAM_COLUMNS,
    STREAM_LABELS,
    attrs_labels,
    stream_of,
)
from ...query.logql.spec import MATCH_ALL, Plan, ordered, plan, to_spec
from ...record import ts_ns
from .pipeline import Entry, Pipeline

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["MATCH_ALL", "Plan", "batches", "entries", "lines", "ordered", "plan", "row_entries", "to_spec"]
CHECK_EVERY_ROWS = 2048


def batches(source: Any, query_plan: Plan, columns: list[str] | tuple[str, ...]) -> Iterator[pa.RecordBatch]:
    """The scan's batches (`columns`), with the plan's batch filter applied."""
    import pyarrow as pa

    wanted = list(dict.fromkeys([*columns, *query_plan.filter_columns]))
    for batch in engine.scan(source, query_plan.spec, wanted):
        if query_plan.batch_filter is not None:
            batch = pa.Table.from_batches([batch]).filter(query_plan.batch_filter).combine_chunks()
            batch = batch.to_batches()[0] if batch.num_rows else None
        if batch is not None and batch.num_rows:
            yield batch.select(list(columns)) if batch.schema.names != list(columns) else batch


def lines(table: pa.Table | pa.RecordBatch) -> list[str]:
    """Each row's Loki line: msg, plus a newline and exc when there is a traceback."""
    import pyarrow.compute as pc

    with_exc = pc.binary_join_element_wise(table.column("msg"), table.column("exc"), "\n")
    return pc.coalesce(with_exc, table.column("msg"), "").to_pylist()


def row_entries(batch: pa.RecordBatch) -> Iterator[Entry]:
    """The entries of a batch holding :data:`.labels.ENTRY_COLUMNS`, labels filled in."""
    names = set(batch.schema.names)
    size = batch.num_rows
    empty = [None] * size

    def column(name: str) -> list[Any]:
        return batch.column(name).to_pylist() if name in names else empty

    stream_keys = list(zip(*(column(name) for name in STREAM_COLUMNS), strict=True))
    metadata = [(name, column(name)) for name in METADATA_COLUMNS if name in names]
    attrs = column("attrs")
    times = ts_ns(batch.column("ts")).tolist()
    text = lines(batch)
    streams: dict[tuple, dict[str, str]] = {}
    for row in range(size):
        if row % CHECK_EVERY_ROWS == 0:
            budget.check()
        key = stream_keys[row]
        stream = streams.get(key)
        if stream is None:
            stream = streams[key] = stream_of(*key)
        level = key[3]
        meta = {name: value if isinstance(value, str) else str(value) for name, values in metadata
                if (value := values[row]) is not None and value != ""}
        if level is not None:
            meta[DETECTED_LEVEL] = DETECTED_LEVELS.get(level, str(level).lower())
        if attrs[row]:
            for name, value in attrs_labels(attrs[row]).items():
                if name not in meta and name not in STREAM_LABELS and value != "":
                    meta[name] = value
        yield Entry(times[row], text[row], dict(stream), meta)


def entries(source: Any, query_plan: Plan, columns: list[str] | tuple[str, ...]) -> Iterator[Entry]:
    """Every entry of the plan that survives the per-entry pipeline, in scan order."""
    pipeline = Pipeline(query_plan.stages)
    for batch in batches(source, query_plan, columns):
        for entry in row_entries(batch):
            if pipeline.run(entry):
                yield entry


