"""OTLP/HTTP logs (``ExportLogsServiceRequest``), protobuf or JSON, → record rows.

Mapping (the "Standard shippers in" table of docs/archive.md): ``timeUnixNano`` (else ``observedTimeUnixNano``,
else the receive time) → ts; ``severityText`` when it names a level, else ``severityNumber`` (1–4
TRACE and 5–8 DEBUG → DEBUG, 9–12 INFO, 13–16 WARNING, 17–20 ERROR, 21–24 FATAL → CRITICAL) → level;
``body`` → msg (a non-string body as JSON); the ``exception.stacktrace`` attribute → exc; the scope
name → logger (the Python SDK's logging handler names the scope after the logger); ``traceId`` (hex) →
trace_id; resource then log-record attributes through :mod:`.mapping` (``host.name`` → host,
``rank`` → rank, ``training_job``/``job``/``service.name`` → job, …). Everything else — the other
attributes, ``spanId``, ``flags``, the scope version, the severity as sent — is kept in ``attrs``.

JSON follows the OTLP/JSON rules: lowerCamelCase keys, 64-bit integers as strings, trace and span
ids as hex. A protobuf body is parsed with the ``opentelemetry-proto`` classes and walked in the
same JSON form.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

from ...record import normalize_level
from ..ingest import IngestError
from .mapping import take_fields

_SEVERITY_BANDS = ((4, "DEBUG"), (8, "DEBUG"), (12, "INFO"), (16, "WARNING"), (20, "ERROR"), (24, "CRITICAL"))


def bad(message: str) -> IngestError:
    return IngestError(400, "bad_body", message)


def parse_protobuf(data: bytes) -> dict[str, Any]:
    """The OTLP/JSON form of a protobuf ``ExportLogsServiceRequest``; 400 when it is not one."""
    from google.protobuf.json_format import MessageToDict
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    request = ExportLogsServiceRequest()
    try:
        request.ParseFromString(data)
    except (DecodeError, ValueError, RecursionError) as exc:
        raise bad(f"body is not an OTLP ExportLogsServiceRequest (protobuf): {str(exc)[:160]}") from None
    decoded = MessageToDict(request)
    for resource_logs in decoded.get("resourceLogs", []):
        for scope_logs in resource_logs.get("scopeLogs", []):
            for record in scope_logs.get("logRecords", []):
                for name in ("traceId", "spanId"):
                    if name in record:
                        record[name] = base64.b64decode(record[name]).hex()
    return decoded


def parse_json(data: bytes) -> dict[str, Any]:
    try:
        decoded = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise bad(f"body is not OTLP/JSON: {str(exc)[:160]}") from None
    if not isinstance(decoded, dict) or not isinstance(decoded.get("resourceLogs", []), list):
        raise bad("body is not an OTLP/JSON ExportLogsServiceRequest (no resourceLogs list)")
    return decoded


def any_value(value: Any) -> Any:
    """An OTLP ``AnyValue`` (JSON form) as a plain Python value."""
    if not isinstance(value, dict) or not value:
        return None
    kind, inner = next(iter(value.items()))
    if kind == "intValue":
        try:
            return int(inner)
        except (TypeError, ValueError):
            return inner
    if kind == "arrayValue":
        return [any_value(v) for v in (inner or {}).get("values", [])]
    if kind == "kvlistValue":
        return attributes((inner or {}).get("values", []))
    return inner  # stringValue, boolValue, doubleValue, bytesValue (base64 text)


def attributes(items: Any) -> dict[str, Any]:
    if not isinstance(items, list):
        return {}
    return {str(item.get("key")): any_value(item.get("value")) for item in items if isinstance(item, dict)}


def _level(record: dict[str, Any]) -> str:
    text = normalize_level(record.get("severityText"))
    if text != "UNKNOWN":
        return text
    try:
        number = int(record.get("severityNumber") or 0)
    except (TypeError, ValueError):
        number = 0
    if isinstance(record.get("severityNumber"), str) and not str(record.get("severityNumber")).isdigit():
        number = _SEVERITY_NAMES.get(str(record["severityNumber"]), 0)
    for top, name in _SEVERITY_BANDS:
        if 1 <= number <= top:
            return name
    return "UNKNOWN"


# MessageToDict writes enums by name (SEVERITY_NUMBER_INFO); OTLP/JSON requires the integer.
_SEVERITY_NAMES = {f"SEVERITY_NUMBER_{name}{suffix}": base + i for base, name in
                   ((1, "TRACE"), (5, "DEBUG"), (9, "INFO"), (13, "WARN"), (17, "ERROR"), (21, "FATAL"))
                   for i, suffix in enumerate(("", "2", "3", "4"))}


def _time(record: dict[str, Any]) -> int | None:
    for name in ("timeUnixNano", "observedTimeUnixNano"):
        try:
            value = int(record.get(name) or 0)
        except (TypeError, ValueError):
            continue
        if value > 0:
            return value
    return None


def rows(request: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """One record row per OTLP log record."""
    for resource_logs in request.get("resourceLogs") or []:
        if not isinstance(resource_logs, dict):
            raise bad("resourceLogs: expected objects")
        resource = attributes((resource_logs.get("resource") or {}).get("attributes"))
        for scope_logs in resource_logs.get("scopeLogs") or []:
            if not isinstance(scope_logs, dict):
                raise bad("scopeLogs: expected objects")
            scope = scope_logs.get("scope") or {}
            for record in scope_logs.get("logRecords") or []:
                if not isinstance(record, dict):
                    raise bad("logRecords: expected objects")
                yield _row(record, resource, scope)


def _row(record: dict[str, Any], resource: dict[str, Any], scope: dict[str, Any]) -> dict[str, Any]:
    own = attributes(record.get("attributes"))
    fields, rest = take_fields({**resource, **own}, skip=("level",))
    body = any_value(record.get("body"))
    row: dict[str, Any] = {**fields, "level": _level(record),
                           "msg": body if isinstance(body, str) else ("" if body is None else
                                                                      json.dumps(body, default=str, ensure_ascii=False))}
    ts = _time(record)
    if ts is not None:
        row["ts"] = ts
    stack = rest.pop("exception.stacktrace", None)
    if stack:
        row["exc"] = str(stack)
    if scope.get("name"):
        row.setdefault("logger", scope["name"])
    trace = record.get("traceId")
    if trace and set(str(trace)) != {"0"}:
        row.setdefault("trace_id", str(trace))
    extra = {"otlp.resource": {k: v for k, v in resource.items() if k in rest}} if resource else {}
    extra.update({k: v for k, v in rest.items() if k not in resource or k in own})
    for name, key in (("spanId", "otlp.span_id"), ("flags", "otlp.flags"), ("severityText", "otlp.severity_text"),
                      ("severityNumber", "otlp.severity_number")):
        if record.get(name) not in (None, "", 0):
            extra[key] = record[name]
    if scope.get("version"):
        extra["otlp.scope_version"] = scope["version"]
    row["attrs"] = {k: v for k, v in extra.items() if v not in ({}, None)}
    return row
