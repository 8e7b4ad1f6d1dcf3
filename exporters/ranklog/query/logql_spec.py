"""A LogQL log query as the engine's :class:`~.filters.QuerySpec`: shared by the archive's Loki API and
``ranklog query '{rank="2"} |= "NCCL"'``, so both select the same records the same (indexed) way."""

from __future__ import annotations

import dataclasses
from typing import Any

from .filter_arrow import literal_alternatives
from .filters import QuerySpec
from .logql import LogSelector

# Regex matchers that accept every value, the missing one included (Grafana's "All" is `.*`): dropped
# from the scan rather than evaluated on every row.
MATCH_ALL = frozenset({".*", "(.*)", ".*?", "^.*$"})


def to_spec(selector: LogSelector, start_ns: int, end_ns: int, **extra: Any) -> QuerySpec:
    """The engine's spec for `selector` over [start_ns, end_ns). The first ``|=`` and the first
    ``|~`` become the spec's ``contains``/``regex``, so a search takes the indexed text path;
    ``label=~".*"`` matchers select everything and are left out."""
    return with_selector(QuerySpec(start_ns=start_ns, end_ns=max(end_ns, start_ns + 1), **extra), selector)


def with_selector(spec: QuerySpec, selector: LogSelector) -> QuerySpec:
    """`spec` narrowed by `selector` too (``ranklog query '{rank="2"} |= "NCCL"' --level ERROR``): its
    first ``|=`` / ``|~`` take the indexed ``contains`` / ``regex`` when the spec has none."""
    contains, regex = spec.contains, spec.regex
    rest: list[tuple[str, str]] = list(spec.line_filters)
    for op, pattern in selector.line_filters:
        if op == "|=" and contains is None and pattern and not spec.ignore_case:
            contains = pattern
        elif op == "|~" and regex is None and not spec.ignore_case:
            regex = pattern
        else:
            rest.append((op, pattern))
    matchers = tuple(m for m in selector.label_matchers if not (m[1] == "=~" and m[2] in MATCH_ALL))
    return dataclasses.replace(spec, contains=contains, regex=regex, line_filters=tuple(rest),
                               label_matchers=spec.label_matchers + matchers,
                               trace_ids=spec.trace_ids or _trace_ids(matchers))


def _trace_ids(matchers: tuple[tuple[str, str, str], ...]) -> tuple[str, ...]:
    """The trace ids a positive ``trace_id`` matcher names, so the trace index picks the files to read
    (the matcher itself stays: the answer is the same, only fewer files are opened)."""
    for name, op, value in matchers:
        if name == "trace_id" and op in ("=", "=~"):
            values = [value] if op == "=" else literal_alternatives(value)
            if values and all(values):
                return tuple(values)
    return ()
