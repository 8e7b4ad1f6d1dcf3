"""What a command says when nothing matched: what was searched, and where the data is.

An empty answer is never silent. Read commands that find no record print one line on stderr and exit
1 (grep's rule, so ``ranklog query … && …`` and ``if ranklog query …`` work in scripts); the line
names the source and the selection, and then what would help: the span of time the source does hold
(an archive's first and last hour, a log folder's first and last record), that the archive holds
nothing yet, or that a folder holds no log file ranklog recognises.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .filters import QuerySpec
from .times import show, zone

EXIT_NOTHING_FOUND = 1
_LIST_FIELDS = {"levels": "level", "hosts": "host", "ips": "ip", "pids": "pid", "ranks": "rank", "jobs": "job",
                "trace_ids": "trace id", "loggers": "logger", "attrs": "attr"}


def selection(spec: QuerySpec, tz_name: str | None = None) -> str:
    """The spec as a person reads it: ``from … until …; level ERROR|CRITICAL; job ppo-*``."""
    tz = zone(tz_name)
    parts = []
    if spec.start_ns is not None or spec.end_ns is not None:
        start = show(spec.start_ns, tz) if spec.start_ns is not None else "the beginning"
        end = show(spec.end_ns, tz) if spec.end_ns is not None else "now"
        parts.append(f"from {start} until {end}")
    for name, label in _LIST_FIELDS.items():
        values = getattr(spec, name)
        if values:
            parts.append(f"{label} {'|'.join(map(str, values))}")
    if spec.step_min is not None or spec.step_max is not None:
        parts.append(f"step {spec.step_min if spec.step_min is not None else ''}..{spec.step_max or ''}")
    for label, value in (("containing", spec.contains), ("matching", spec.regex)):
        if value is not None:
            parts.append(f"{label} {value!r}")
    parts += [f"{name}{op}{value!r}" for name, op, value in spec.label_matchers]
    parts += [f"{op} {pattern!r}" for op, pattern in spec.line_filters]
    return "; ".join(parts) or "no filter"


def explain(source: Any, spec: QuerySpec, tz_name: str | None = None) -> str:
    """One line: nothing matched in `source` for `spec`, and where its data is."""
    line = f"no records matched in {source.describe()} ({selection(spec, tz_name)})"
    hint = _where_the_data_is(source, spec, tz_name)
    return f"{line}; {hint}" if hint else line


def _where_the_data_is(source: Any, spec: QuerySpec, tz_name: str | None) -> str:
    tz = zone(tz_name)
    if source.kind == "archive":
        files = source.list_files()
        if not files:
            return "the archive holds no data yet (is an agent shipping to it? see `ranklog agent --help`)"
        first, end = files[0].start_ns, files[-1].start_ns + 3600 * 10**9
        return f"the archive holds records from {show(first, tz)} to {show(end, tz)} (by hour)"
    if source.kind == "log_dir":
        from ..parse.directory import list_log_files

        if not list_log_files(source.real_path):
            return ("it holds no file ranklog reads as a log (by its name: *.log, *.out, *.err, *.txt, *.jsonl…, "
                    "or a ranklog, Ray or torchrun layout)")
        if spec.start_ns is None and spec.end_ns is None:
            return ""
        from ..record import ts_ns
        from . import engine

        times = ts_ns(engine.read(source, QuerySpec(order=()), ["ts"]).column("ts"))
        if not len(times):
            return "its log files hold no records"
        return f"its records run from {show(int(times.min()), tz)} to {show(int(times.max()), tz)}"
    if source.kind == "remote" and (spec.start_ns is not None or spec.end_ns is not None):
        total = source.count(dataclasses.replace(spec, start_ns=None, end_ns=None))
        return f"{total} record(s) match outside that time range" if total else ""
    return ""
