"""Every PromQL query the dashboards and rules run, and the metric names in it.

Used by the tests (every name must be in ``ranklog.metrics.METRICS`` and exported by a live agent
or archive; every query must evaluate against a live Prometheus) and handy when reviewing a change.
The name extraction is a small PromQL lexer, not a full parser: it removes strings, label
matchers, range/offset durations and grouping label lists, then keeps identifiers that are not
functions, aggregations or keywords.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dashboards import GENERATED_DIR

# Grafana's variables, as the live test substitutes them ("All" is `.*`).
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "15s", "$__range": "10m",
                     "$training_job": ".*", "$node": ".*", "$rank": ".*"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or",
            "unless", "inf", "nan", "atan2"}
# Series Prometheus itself makes: rule state and scrape health.
PROMETHEUS_SERIES = {"up", "ALERTS", "ALERTS_FOR_STATE"}

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_OFFSET = re.compile(r"\boffset\s+-?\w+")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_IDENT = re.compile(r"(?<![\w.:$])([A-Za-z_:][\w:]*)(\s*\()?")
_LABEL_VALUES = re.compile(r"^label_values\((.*),\s*\w+\)$", re.S)


@dataclass(frozen=True)
class Query:
    where: str  # "training.json: panel 'Step time' B" or "rule RanklogErrorBurst"
    expr: str
    instant: bool = False
    kind: str = "prometheus"  # the datasource type: "prometheus" (PromQL) or "loki" (LogQL, the archive)


def substitute(expr: str, values: dict[str, str] | None = None) -> str:
    """`expr` with Grafana's variables replaced (`values` overrides the defaults, e.g. ``{"$rank": "(0|3)"}``)."""
    table = {**GRAFANA_VARIABLES, **(values or {})}
    for name in sorted(table, key=len, reverse=True):
        expr = expr.replace(name, table[name])
    return expr


def metric_names(expr: str) -> set[str]:
    """Metric names referenced by a PromQL expression (or a Grafana ``label_values(…)`` query)."""
    match = _LABEL_VALUES.match(expr.strip())
    if match:
        expr = match.group(1)
    text = _STRING.sub('""', substitute(expr))
    text = _MATCHERS.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _OFFSET.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    names = set()
    for ident, call in _IDENT.findall(text):
        if call or ident.lower() in KEYWORDS:
            continue
        names.add(ident)
    return names


def variable_selector(query: str) -> str:
    """The PromQL selector inside a ``label_values(selector, label)`` variable query."""
    match = _LABEL_VALUES.match(query.strip())
    if not match:
        raise ValueError(f"not a label_values() query: {query}")
    return match.group(1)


def dashboard_queries(directory: Path = GENERATED_DIR / "dashboards", kind: str = "prometheus") -> Iterator[Query]:
    """Every panel target and template variable query of the generated dashboards on datasources of
    type `kind` ("loki": the log panels and annotations, which the archive's Loki API answers)."""
    for path in sorted(directory.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for variable in data.get("templating", {}).get("list", []):
            if variable.get("type") == "query" and kind == "prometheus":
                yield Query(f"{path.name}: variable {variable['name']}", variable_selector(variable["query"]),
                            instant=True)
        for panel in _panels(data.get("panels", [])):
            for tgt in panel.get("targets", []):
                if _kind(tgt, panel) == kind:
                    yield Query(f"{path.name}: panel {panel['title']!r} {tgt['refId']}", tgt["expr"],
                                bool(tgt.get("instant")), kind)
        for annotation in data.get("annotations", {}).get("list", []):
            if annotation.get("expr") and _kind(annotation, annotation) == kind:
                yield Query(f"{path.name}: annotation {annotation['name']!r}", annotation["expr"], False, kind)


def _kind(target: dict, panel: dict) -> str:
    """The datasource type of a target (its own datasource, else its panel's); Prometheus by default."""
    return (target.get("datasource") or panel.get("datasource") or {}).get("type", "prometheus")


def _panels(panels: list[dict]) -> Iterator[dict]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def rule_queries(rules_file: Path = GENERATED_DIR / "ranklog.rules.yml") -> Iterator[Query]:
    import yaml

    doc = yaml.safe_load(rules_file.read_text(encoding="utf-8"))
    for group in doc["groups"]:
        for rule in group["rules"]:
            yield Query(f"rule {rule.get('alert') or rule.get('record')}", rule["expr"], instant=True)


def recorded_names(rules_file: Path = GENERATED_DIR / "ranklog.rules.yml") -> set[str]:
    import yaml

    doc = yaml.safe_load(rules_file.read_text(encoding="utf-8"))
    return {rule["record"] for group in doc["groups"] for rule in group["rules"] if "record" in rule}


def training_metric_names(expr: str) -> set[str]:
    """Values that `expr` selects for ``ranklog_training_metric``'s ``name`` label (=, or =~ alternatives)."""
    out: set[str] = set()
    for op, value in re.findall(r'ranklog_training_metric\{[^}]*?\bname(=~|=)"([^"]*)"', expr):
        out.update(value.split("|") if op == "=~" else [value])
    return out
