"""What Grafana's Logs Drilldown asks beyond LogQL: log volumes, patterns, detected labels and fields.

- **volume** (``index/volume``, ``index/volume_range``): line bytes per series of the labels the
  selector names (or ``targetLabels``; ``aggregateBy=labels`` gives one series per label name), from
  the day volume index (:mod:`ranklog.query.volume_index`), never a scan of the records; a selector
  on anything but stream labels is answered by a scan. Largest first, ``limit`` series.
- **patterns**: the triage's templates (:func:`ranklog.triage.templates.mask_line`: times, ids,
  numbers, paths… masked) written as Loki patterns (every mask ``<_>``), so Drilldown's ``|> "…"``
  filters select the lines a pattern counted; counted per ``step`` bucket and per level.
- **detected labels**: the stream labels of the matching streams and their cardinality (from the
  volume index). Unlike Loki, a label whose values are all numbers is kept: a rank is not an id.
- **detected fields / values**: over the newest ``line_limit`` lines of the query (its pipeline
  applied): the structured metadata (``parsers: null``) and what ``| json`` / ``| logfmt`` find in the
  line, with Loki's types (int, float, boolean, duration, bytes, string) and distinct-value counts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ...query import budget, volume_index
from ...query.filter_arrow import and_all, matcher_expression
from ...query.logql.extract import LinePattern, ParseFailure, json_fields, logfmt_fields
from ...query.logql.labels import (
    DETECTED_LEVELS,
    ERROR_DETAILS_LABEL,
    ERROR_LABEL,
    STREAM_COLUMNS,
    STREAM_LABELS,
    UNKNOWN_SERVICE,
    Labels,
    stream_of,
)
from ...query.logql.syntax import LogSelector
from ...query.logql.values import bytes_value, go_duration_seconds
from ...triage.templates import mask_line
from . import entries, evaluate

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

MAX_PATTERNS = 500
PATTERN_PREFIX_CHARS = 1000
DEFAULT_LINE_LIMIT = 1000
DEFAULT_FIELD_LIMIT = 1000
_CAPTURE_LIKE = re.compile(r"<(?:_|[A-Za-z_][A-Za-z0-9_]*)>")
_WILDCARD = "\x00"


# -- volume ------------------------------------------------------------------------------------------------------
def _index_expression(selector: LogSelector) -> Any:
    parts = [matcher_expression(name, op, value) for name, op, value in selector.matchers
             if not (op == "=~" and value in entries.MATCH_ALL)]
    return and_all(parts)


def _indexable(selector: LogSelector) -> bool:
    names = {*STREAM_COLUMNS, "service_name"}
    return not selector.stages and all(name in names for name, _, _ in selector.matchers)


def volume_table(source: Any, selector: LogSelector, start_ns: int, end_ns: int, step_ns: int | None = None) -> pa.Table:
    """(bucket, stream columns, entries, bytes) of the selected records, hour buckets at the finest
    (`step_ns`: see :func:`ranklog.query.volume_index.volumes`)."""
    import pyarrow as pa

    def scan(low: int, high: int) -> pa.Table:
        plan = entries.plan(selector, low, high)
        columns = ["ts", *volume_index.KEY_COLUMNS, "msg", "exc"]
        batches = list(entries.batches(source, plan, columns))
        if batches:
            return pa.Table.from_batches(batches)
        from ...record import arrow_schema

        return pa.schema([arrow_schema().field(n) for n in columns]).empty_table()

    if selector.never:
        return volume_index.aggregate(scan(start_ns, start_ns + 1)).slice(0, 0)
    if _indexable(selector) and getattr(source, "kind", "") == "archive":
        return volume_index.volumes(source, start_ns, end_ns, _index_expression(selector), scan, step_ns)
    return volume_index.aggregate(scan(start_ns, end_ns))


def volume_series(table: pa.Table, target: list[str], by_labels: bool) -> dict[Labels, dict[int, int]]:
    """Bytes per (series labels) and bucket: series of the `target` labels' values, or with
    `by_labels` one series per label name (value "")."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = {name: pc.cast(table.column(name), pa.string()) for name in STREAM_COLUMNS}
    columns["service_name"] = pc.coalesce(table.column("job"), pa.scalar(UNKNOWN_SERVICE))
    names = [name for name in sorted(dict.fromkeys(target)) if name in columns]
    out: dict[Labels, dict[int, int]] = {}
    if by_labels:
        for name in names:
            present = table.filter(pc.is_valid(columns[name]))
            if present.num_rows:
                out[((name, ""),)] = _per_bucket(present.column("bucket"), present.column("bytes"))
        return out
    if not names:
        return out
    keyed = pa.table({**{name: columns[name] for name in names}, "bucket": table.column("bucket"),
                      "bytes": table.column("bytes")})
    grouped = keyed.group_by([*names, "bucket"], use_threads=False).aggregate([("bytes", "sum")])
    for row in grouped.to_pylist():
        key = tuple((name, row[name]) for name in names if row[name] is not None)
        if key:
            buckets = out.setdefault(key, {})
            buckets[row["bucket"]] = buckets.get(row["bucket"], 0) + row["bytes_sum"]
    return out


def _per_bucket(buckets: pa.ChunkedArray, sizes: pa.ChunkedArray) -> dict[int, int]:
    import pyarrow as pa

    grouped = pa.table({"bucket": buckets, "bytes": sizes}).group_by(["bucket"]).aggregate([("bytes", "sum")])
    return dict(zip(grouped.column("bucket").to_pylist(), grouped.column("bytes_sum").to_pylist(), strict=True))


def target_labels(selector: LogSelector, given: str | None) -> list[str]:
    """The labels a volume aggregates into: ``targetLabels``, else the ones the selector names."""
    if given:
        return [name.strip() for name in given.split(",") if name.strip()]
    named = [name for name, _, _ in selector.matchers if name in STREAM_LABELS]
    return list(dict.fromkeys(named)) or ["service_name"]


def largest(series: dict[Labels, dict[int, int]], limit: int) -> list[Labels]:
    totals = sorted(series, key=lambda key: (-sum(series[key].values()), key))
    return totals[:limit] if limit > 0 else totals


# -- patterns ------------------------------------------------------------------------------------------------------
def loki_pattern(line: str) -> str:
    """The Loki pattern of a line: its first line with the triage masks as ``<_>``, then ``<_>`` for
    whatever follows (more lines, or the rest of a very long line). Always matches `line` itself."""
    first, newline, _ = line.partition("\n")
    cut = len(first) > PATTERN_PREFIX_CHARS
    first = first[:PATTERN_PREFIX_CHARS]
    masked = _CAPTURE_LIKE.sub(_WILDCARD, mask_line(first, _WILDCARD))
    masked = re.sub(f"{_WILDCARD}+", _WILDCARD, masked)
    pattern = masked.replace(_WILDCARD, "<_>")
    if (newline or cut) and not pattern.endswith("<_>"):
        pattern += "<_>"
    if pattern and not LinePattern(pattern, parser=False).test(line):
        literal = pattern.split("<_>", 1)[0]
        pattern = literal + "<_>" if literal and len(literal) < len(line) else "<_>"
    return pattern


def patterns(source: Any, selector: LogSelector, start_ns: int, end_ns: int, step_ns: int) -> list[dict[str, Any]]:
    """Loki's patterns answer: ``[{"pattern", "level", "samples": [[seconds, count], …]}]``, most frequent first."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from ...record import ts_ns

    if selector.never:
        return []
    counts: dict[tuple[str, str], dict[int, int]] = {}
    cache: dict[str, str] = {}
    plan = entries.plan(selector, start_ns, end_ns)
    rows = (entries.entries(source, plan, evaluate.LINE_COLUMNS) if plan.stages
            else _pattern_batches(source, plan))
    for batch in rows:
        if not isinstance(batch, pa.RecordBatch):  # entries of a pipeline: one at a time
            _count(counts, cache, [batch.line], [batch.meta.get("detected_level", "unknown")],
                   np.asarray([batch.ts]), start_ns, step_ns)
            continue
        budget.check()
        lines = pc.dictionary_encode(pa.array(entries.lines(batch), pa.string()))
        levels = pc.cast(batch.column("level"), pa.string()).to_pylist()
        texts = lines.dictionary.to_pylist()
        per_line = [texts[i] for i in lines.indices.to_pylist()]
        _count(counts, cache, per_line, [DETECTED_LEVELS.get(level or "UNKNOWN", "unknown") for level in levels],
               ts_ns(batch.column("ts")), start_ns, step_ns)
    ranked = sorted(counts.items(), key=lambda item: (-sum(item[1].values()), item[0]))[:MAX_PATTERNS]
    return [{"pattern": pattern, "level": level,
             "samples": [[bucket // 10**9 if bucket % 10**9 == 0 else bucket / 1e9, count]
                         for bucket, count in sorted(samples.items())]}
            for (pattern, level), samples in ranked]


def _pattern_batches(source: Any, plan: entries.Plan) -> Iterable[pa.RecordBatch]:
    return entries.batches(source, plan, ["ts", "msg", "exc", "level"])


def _count(counts: dict[tuple[str, str], dict[int, int]], cache: dict[str, str], lines: list[str], levels: list[str],
           times: np.ndarray, start_ns: int, step_ns: int) -> None:
    buckets = times // step_ns * step_ns  # aligned to the step, as Loki's pattern samples are
    for line, level, bucket in zip(lines, levels, buckets.tolist(), strict=True):
        pattern = cache.get(line)
        if pattern is None:
            pattern = cache[line] = loki_pattern(line)
            if len(cache) > 200_000:
                cache.clear()
        samples = counts.setdefault((pattern, level), {})
        samples[bucket] = samples.get(bucket, 0) + 1


# -- detected labels ---------------------------------------------------------------------------------------------------
def detected_labels(source: Any, selector: LogSelector, start_ns: int, end_ns: int) -> list[dict[str, Any]]:
    """``[{"label", "cardinality"}]`` of the stream labels of the matching streams."""
    if _indexable(selector):
        table = volume_table(source, selector, start_ns, end_ns)
        sets = {tuple(sorted(stream_of(*values).items()))
                for values in zip(*(table.column(name).to_pylist() for name in STREAM_COLUMNS), strict=True)}
    else:
        sets = evaluate.distinct_label_sets(source, selector, start_ns, end_ns)
    values: dict[str, set[str]] = {}
    for labels in sets:
        for name, value in labels:
            values.setdefault(name, set()).add(value)
    return [{"label": name, "cardinality": len(found)} for name, found in sorted(values.items())]


# -- detected fields -------------------------------------------------------------------------------------------------------
_SKIPPED = frozenset({ERROR_LABEL, ERROR_DETAILS_LABEL})


def _field_type(values: set[str]) -> str:
    def all_of(check: Any) -> bool:
        for value in values:
            try:
                check(value)
            except (ValueError, TypeError):
                return False
        return True

    if all_of(int):
        return "int"
    if all_of(float):
        return "float"
    if all(value.lower() in ("true", "false") for value in values):
        return "boolean"
    if all_of(go_duration_seconds):
        return "duration"
    if all_of(bytes_value):
        return "bytes"
    return "string"


def _json_paths(line: str) -> dict[str, list[str]]:
    import json

    try:
        value = json.loads(line)
    except ValueError:
        return {}
    out: dict[str, list[str]] = {}

    def walk(node: Any, path: list[str]) -> None:
        if isinstance(node, dict):
            for key, inner in node.items():
                walk(inner, [*path, str(key)])
        elif not isinstance(node, list) and path:
            from ...query.logql.labels import sanitize

            out.setdefault("_".join(sanitize(part) for part in path), path)

    walk(value, [])
    return out


def field_values(source: Any, selector: LogSelector, start_ns: int, end_ns: int,
                 line_limit: int) -> dict[str, tuple[set[str], str | None, list[str] | None]]:
    """Per detected field: (distinct values, parser or None for structured metadata, JSON path)."""
    found: dict[str, tuple[set[str], str | None, list[str] | None]] = {}
    stream_names = set(STREAM_LABELS)
    for entry in evaluate.select_entries(source, selector, start_ns, end_ns, line_limit, forward=False):
        for name, value in entry.meta.items():
            if name not in stream_names:
                found.setdefault(name, (set(), None, None))[0].add(value)
        parser, fields, paths = None, {}, {}
        try:
            fields, parser = json_fields(entry.line), "json"
            paths = _json_paths(entry.line)
        except ParseFailure:
            try:
                fields, parser = logfmt_fields(entry.line, (), False, False), "logfmt"
            except ParseFailure:
                fields = {}
        for name, value in {**fields, **{k: v for k, v in entry.parsed.items() if k not in fields}}.items():
            if name in _SKIPPED or name in stream_names or name in entry.meta:
                continue
            found.setdefault(name, (set(), parser or "logfmt", paths.get(name)))[0].add(value)
    return found


def detected_fields(found: dict[str, tuple[set[str], str | None, list[str] | None]], limit: int) -> list[dict[str, Any]]:
    out = []
    for name, (values, parser, path) in sorted(found.items())[:limit]:
        field: dict[str, Any] = {"label": name, "type": _field_type(values), "cardinality": len(values),
                                 "parsers": [parser] if parser else None}
        if path is not None:
            field["jsonPath"] = path
        out.append(field)
    return out
