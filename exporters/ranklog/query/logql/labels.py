"""What a record looks like to Loki: stream labels, structured metadata, and their names.

- **Stream labels** (indexed in Loki; here the low-cardinality columns): ``job``, ``host``, ``rank``,
  ``level``, ``format``, and ``service_name`` — the record's ``job`` as Loki's service-name discovery
  would derive it (``job`` is on Loki's ``discover_service_name`` list; a record without a job is
  ``unknown_service``, as in Loki). Logs Drilldown lists services by ``service_name``.
- **Structured metadata** (per line, not indexed): ``local_rank``, ``role``, ``trace_id``, ``step``,
  ``pid``, ``logger``, ``source``, ``detected_level`` (the level as Loki's level detection spells it:
  ``error``, ``warn``, …) and every key of ``attrs`` (nested keys joined by ``_``, names sanitized as
  Loki's parsers do: ``perf/throughput`` → ``perf_throughput``).

A stream selector may also match ``local_rank``, ``role``, ``trace_id`` and ``detected_level`` (an
extension: Loki only matches stream labels there); any other name is an absent label, i.e. ``""``.
Numbers are decimal text; a null is no label.
"""

from __future__ import annotations

import json
import re
from typing import Any

STREAM_COLUMNS: tuple[str, ...] = ("job", "host", "rank", "level", "format")
SERVICE_NAME = "service_name"
UNKNOWN_SERVICE = "unknown_service"
STREAM_LABELS: tuple[str, ...] = ("format", "host", "job", "level", "rank", SERVICE_NAME)
METADATA_COLUMNS: tuple[str, ...] = ("local_rank", "role", "trace_id", "step", "pid", "logger", "source")
DETECTED_LEVEL = "detected_level"
# The labels a stream selector can match (anything else is absent on every record).
SELECTOR_LABELS: tuple[str, ...] = (*STREAM_LABELS, "local_rank", "role", "trace_id", DETECTED_LEVEL)
# Loki's detected_level spellings of the record's levels.
DETECTED_LEVELS = {"DEBUG": "debug", "INFO": "info", "WARNING": "warn", "ERROR": "error", "CRITICAL": "critical",
                   "UNKNOWN": "unknown"}
LEVEL_OF_DETECTED = {value: key for key, value in DETECTED_LEVELS.items()}
ERROR_LABEL = "__error__"
ERROR_DETAILS_LABEL = "__error_details__"
# A label set as a dict key: (name, value) pairs in a fixed order.
Labels = tuple[tuple[str, str], ...]
# The record columns a line and its labels are built from.
ENTRY_COLUMNS: tuple[str, ...] = ("ts", "msg", "exc", *STREAM_COLUMNS, *METADATA_COLUMNS, "attrs")

_INVALID = re.compile(r"[^a-zA-Z0-9_:]")


def sanitize(name: str) -> str:
    """A label name as Loki's parsers make it: ASCII letters, digits, ``_`` and ``:``, not starting with a digit."""
    cleaned = _INVALID.sub("_", name)
    return "_" + cleaned if cleaned[:1].isdigit() else cleaned


def flatten(value: Any, prefix: str, out: dict[str, str]) -> None:
    """JSON `value` as labels the way Loki's ``| json`` extracts them: nested keys joined by ``_``,
    arrays skipped, numbers and booleans as their JSON text, null as ""."""
    if isinstance(value, dict):
        for key, inner in value.items():
            flatten(inner, f"{prefix}_{sanitize(str(key))}" if prefix else sanitize(str(key)), out)
    elif isinstance(value, list):
        return
    elif prefix and prefix not in out:
        out[prefix] = json_text(value)


def json_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False) if isinstance(value, (dict, list)) else str(value)


def attrs_labels(text: str | None) -> dict[str, str]:
    """The structured metadata an ``attrs`` JSON text contributes."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {"attrs": text}
    out: dict[str, str] = {}
    if isinstance(value, dict):
        flatten(value, "", out)
    return out


def text_value(value: Any) -> str | None:
    """A column value as label text (None: no label)."""
    if value is None:
        return None
    text = value if isinstance(value, str) else str(value)
    return text or None


def stream_of(job: Any, host: Any, rank: Any, level: Any, fmt: Any) -> dict[str, str]:
    """The stream labels of a record from its columns (sorted by name, as Loki writes them)."""
    out: dict[str, str] = {}
    for name, value in (("format", fmt), ("host", host), ("job", job), ("level", level), ("rank", rank)):
        text = text_value(value)
        if text is not None:
            out[name] = text
    out[SERVICE_NAME] = out.get("job", UNKNOWN_SERVICE)
    return out


def metadata_of(values: dict[str, Any], attrs: str | None) -> dict[str, str]:
    """The structured metadata of a record: its metadata columns, detected_level, then attrs keys
    (a key that collides with a column or a stream label keeps the column's value)."""
    out: dict[str, str] = {}
    for name in METADATA_COLUMNS:
        text = text_value(values.get(name))
        if text is not None:
            out[name] = text
    level = values.get("level")
    if level is not None:
        out[DETECTED_LEVEL] = DETECTED_LEVELS.get(str(level), str(level).lower())
    for key, value in attrs_labels(attrs).items():
        if key not in out and key not in STREAM_LABELS and value != "":
            out[key] = value
    return out
