"""Shipper attributes and labels → record fields: one table of names for every shipper.

The first name present wins; the value it came from leaves the attributes (it is now a column),
every other attribute stays in ``attrs``. OTLP's ``service.name`` becomes ``job`` only when no
training-job attribute is present and it is not the SDK's ``unknown_service`` placeholder.
"""

from __future__ import annotations

from typing import Any

FIELD_SOURCES: dict[str, tuple[str, ...]] = {
    "host": ("host.name", "host", "hostname", "instance", "node"),
    "ip": ("host.ip", "ip"),
    "pid": ("process.pid", "pid"),
    "rank": ("rank", "ranklog.rank", "training.rank"),
    "local_rank": ("local_rank", "ranklog.local_rank", "training.local_rank"),
    "job": ("training_job", "ranklog.job", "job", "service.name"),
    "role": ("role", "ranklog.role"),
    "trace_id": ("trace_id", "ranklog.trace_id"),
    "step": ("step", "training.step"),
    "logger": ("logger", "logger.name", "logger_name"),
    "level": ("level", "severity", "detected_level", "log.level"),
}


def take_fields(attributes: dict[str, Any], skip: tuple[str, ...] = ()) -> tuple[dict[str, Any], dict[str, Any]]:
    """(record fields found in `attributes`, the remaining attributes). Fields in `skip` are left."""
    rest = dict(attributes)
    fields: dict[str, Any] = {}
    for name, sources in FIELD_SOURCES.items():
        if name in skip:
            continue
        for source in sources:
            value = rest.get(source)
            if isinstance(value, list):
                value = value[0] if value else None
            if value is None or value == "":
                continue
            if source == "service.name" and str(value).startswith("unknown_service"):
                continue
            fields[name] = value
            del rest[source]
            break
    return fields, rest
