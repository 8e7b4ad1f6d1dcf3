"""An independent, row-by-row Python implementation of QuerySpec matching and ordering.

The engine's answers (pushed-down Arrow expressions, partition pruning, trace index) are checked
against this simple reading of the spec.
"""

from __future__ import annotations

import fnmatch
import json
import re
from typing import Any

import pyarrow as pa

from ranklog.query.filters import QuerySpec
from ranklog.record import ts_ns


def rows_of(table: pa.Table) -> list[dict[str, Any]]:
    """Rows as dicts with `ts` as integer nanoseconds."""
    ts = ts_ns(table.column("ts")).tolist()
    rows = table.drop_columns(["ts"]).to_pylist()
    for row, value in zip(rows, ts, strict=True):
        row["ts"] = value
    return rows


def _text_hit(row: dict[str, Any], needle: str, regex: bool, ignore_case: bool) -> bool:
    for text in (row["msg"], row["exc"]):
        if text is None:
            continue
        if regex:
            if re.search(needle, text, re.IGNORECASE if ignore_case else 0):
                return True
        elif (needle.lower() in text.lower()) if ignore_case else (needle in text):
            return True
    return False


def _attr_hit(row: dict[str, Any], item: str) -> bool:
    key, sep, value = item.partition("=")
    if not row["attrs"]:
        return False
    node: Any = json.loads(row["attrs"])
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    if not sep:
        return True
    return (node if isinstance(node, str) else json.dumps(node, separators=(",", ":"))) == value


def _in(value: Any, wanted: tuple) -> bool:
    return not wanted or value in wanted


def _glob(value: str | None, patterns: tuple[str, ...]) -> bool:
    return not patterns or (value is not None and any(fnmatch.fnmatchcase(value, p) for p in patterns))


def matches(row: dict[str, Any], spec: QuerySpec) -> bool:
    return all((
        spec.start_ns is None or row["ts"] >= spec.start_ns,
        spec.end_ns is None or row["ts"] < spec.end_ns,
        _in(row["level"], spec.levels), _glob(row["host"], spec.hosts), _in(row["ip"], spec.ips),
        _in(row["pid"], spec.pids), _in(row["rank"], spec.ranks), _in(row["job"], spec.jobs),
        _in(row["trace_id"], spec.trace_ids), _glob(row["logger"], spec.loggers),
        spec.step_min is None or (row["step"] is not None and row["step"] >= spec.step_min),
        spec.step_max is None or (row["step"] is not None and row["step"] <= spec.step_max),
        spec.contains is None or _text_hit(row, spec.contains, False, spec.ignore_case),
        spec.regex is None or _text_hit(row, spec.regex, True, spec.ignore_case),
        all(_attr_hit(row, item) for item in spec.attrs),
    ))


def expected_keys(table: pa.Table, spec: QuerySpec) -> list[tuple]:
    """(ts, host, source_id, offset) of the matching rows in the spec's order, limited."""
    rows = [row for row in rows_of(table) if matches(row, spec)]
    keys = [key.lstrip("-") for key in spec.order] + [k for k in ("host", "source_id", "offset")
                                                      if k not in {key.lstrip("-") for key in spec.order}]
    if spec.order:
        rows.sort(key=lambda row: tuple((row[k] is None, row[k] if row[k] is not None else 0) for k in keys),
                  reverse=spec.order[0].startswith("-"))
    out = [(row["ts"], row["host"], row["source_id"], row["offset"]) for row in rows]
    return out if spec.limit is None else out[:spec.limit]


def keys_of(table: pa.Table) -> list[tuple]:
    return [(row["ts"], row["host"], row["source_id"], row["offset"]) for row in rows_of(table)]
