"""One dispatch for every ingest body: which decoder a request takes (by endpoint and Content-Type),
and the 400 that names the right endpoint when a body is in another endpoint's shape.

WAL content-type codes (a byte in each WAL entry; replay decodes with the same code): 1 Arrow IPC and
2 NDJSON are :mod:`..ingest`'s; the codes here (16+) carry :func:`.batch.wrap`'s key envelope.
``/v1/ingest`` takes Arrow, NDJSON (and Fluent Bit's ``json_lines``), JSON arrays (Vector, Fluent Bit
``json``) and msgpack (Fluent Bit); ``/v1/logs`` OTLP protobuf or JSON; ``/loki/api/v1/push`` Loki
protobuf (snappy) or JSON. An OTLP or Loki body on ``/v1/ingest``, a Loki body on ``/v1/logs``, etc.
is refused before anything reaches the WAL: nothing of it is stored; so is an Alertmanager webhook
notification on any of them (its endpoint is ``/v1/alerts``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...alert_notifications import ALERTS_PATH
from ..ingest import CONTENT_TYPES, NDJSON, IngestError, decompress
from ..ingest import decode as decode_native
from ..ingest_budget import PROTOBUF_FACTOR, UNLIMITED, Charge
from . import generic, loki_push, otlp, protobuf_count
from .batch import batch_source_id, to_table, unwrap

INGEST, OTLP_LOGS, LOKI_PUSH = "/v1/ingest", "/v1/logs", "/loki/api/v1/push"
JSON_ARRAY, MSGPACK, OTLP_PROTOBUF, OTLP_JSON, LOKI_PROTOBUF, LOKI_JSON = 16, 17, 18, 19, 20, 21
SHIPPER_CODES = frozenset({JSON_ARRAY, MSGPACK, OTLP_PROTOBUF, OTLP_JSON, LOKI_PROTOBUF, LOKI_JSON})
PROTOBUF = "application/x-protobuf"
MSGPACK_TYPES = ("application/msgpack", "application/x-msgpack", "application/vnd.msgpack")
_JSON_TYPES = ("application/json", "text/json")
_NOTIFICATION_KEYS = frozenset({"version", "groupKey", "status", "receiver", "alerts"})  # Alertmanager always sends them
_SHAPE_ENDPOINT = {"otlp": OTLP_LOGS, "loki": LOKI_PUSH, "events": INGEST, "arrow": INGEST, "alertmanager": ALERTS_PATH}
_SHAPE_NAME = {"otlp": "an OTLP/HTTP logs request", "loki": "a Loki push request",
               "events": "a JSON array or NDJSON of log events", "arrow": "an Arrow IPC stream",
               "alertmanager": "an Alertmanager webhook notification"}
# (reason, source column, format column) of each shipper code's rows
_ORIGIN = {JSON_ARRAY: ("json", "http:/v1/ingest", "json"), MSGPACK: ("msgpack", "http:/v1/ingest", "json"),
           OTLP_PROTOBUF: ("otlp", "otlp:/v1/logs", "otlp"), OTLP_JSON: ("otlp", "otlp:/v1/logs", "otlp"),
           LOKI_PROTOBUF: ("loki", "loki:/loki/api/v1/push", "loki"), LOKI_JSON: ("loki", "loki:/loki/api/v1/push", "loki")}


def media_type(header: str | None) -> str:
    return (header or "").split(";", 1)[0].strip().lower()


# endpoint → (WAL code of a protobuf body, of a JSON body, what the endpoint takes, in words)
_ENDPOINT_BODIES = {
    OTLP_LOGS: (OTLP_PROTOBUF, OTLP_JSON, f"OTLP/HTTP logs as {PROTOBUF} or application/json"),
    LOKI_PUSH: (LOKI_PROTOBUF, LOKI_JSON, f"Loki push requests as {PROTOBUF} (snappy) or application/json"),
}


def endpoint_code(endpoint: str, content_type: str | None) -> int:
    """The WAL code of a shipper endpoint's request; 415 naming what the endpoint takes."""
    protobuf_code, json_code, takes = _ENDPOINT_BODIES[endpoint]
    media = media_type(content_type)
    if media == PROTOBUF:
        return protobuf_code
    if media in _JSON_TYPES:
        return json_code
    raise IngestError(415, "unsupported_media_type", f"{endpoint} takes {takes}, got {media or 'none'!r}")


def ingest_code(content_type: str | None) -> int | None:
    """The code of a ``/v1/ingest`` media type this module decodes (msgpack), or None (ingest.py's)."""
    media = media_type(content_type)
    if media in MSGPACK_TYPES:
        return MSGPACK
    if media == PROTOBUF:
        raise IngestError(400, "wrong_endpoint", f"{INGEST} takes Arrow IPC, NDJSON, JSON arrays or msgpack; "
                          f"protobuf log bodies are OTLP (POST {OTLP_LOGS}) or Loki push (POST {LOKI_PUSH})")
    return None


def wrong_endpoint(shape: str, here: str) -> IngestError:
    return IngestError(400, "wrong_endpoint", f"this is {_SHAPE_NAME[shape]}: POST it to {_SHAPE_ENDPOINT[shape]}, "
                       f"not {here}; nothing was stored")


def json_shape(data: bytes) -> str | None:
    """'otlp', 'loki' or 'events' for a JSON body (its first value decides), None when not JSON."""
    text = data.lstrip()
    if text[:1] not in (b"{", b"["):
        return None
    if text[:1] == b"[":
        return "events"
    try:
        first, _ = json.JSONDecoder().raw_decode(text.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
    if isinstance(first, dict) and isinstance(first.get("resourceLogs"), list):
        return "otlp"
    if isinstance(first, dict) and isinstance(first.get("streams"), list):
        return "loki"
    if isinstance(first, dict) and isinstance(first.get("alerts"), list) and first.keys() >= _NOTIFICATION_KEYS \
            and "msg" not in first:
        return "alertmanager"
    return "events"


_FIRST = re.compile(rb"\s*(.)", re.DOTALL)


def charge_json(data: bytes, charge: Charge) -> None:
    """Before anything parses a JSON-looking body: charge what its objects and arrays will cost as
    Python objects (every ``{`` or ``[`` may be one; counted at memchr speed, no copy)."""
    first = _FIRST.match(data)
    if first is not None and first.group(1) in (b"{", b"["):
        charge.estimate(data.count(b"{") + data.count(b"["), len(data), "JSON body")


def binary_shape(data: bytes, limit: int, charge: Charge = UNLIMITED) -> str | None:
    """'arrow' or 'loki' (snappy + PushRequest with streams) for a binary body, else None."""
    if data[:4] == b"\xff\xff\xff\xff":
        return "arrow"
    try:
        request = loki_push.push_request_class()()
        request.ParseFromString(loki_push.snappy_block(data, limit, charge))
    except Exception:  # any failure just means "not a Loki body"
        return None
    return "loki" if len(request.streams) else None


def check_ingest_json(data: bytes) -> str | None:
    """For ``/v1/ingest``'s JSON media types: 'array' for a JSON array (decoded here), None for NDJSON
    (ingest.py's); 400 naming the endpoint for an OTLP or Loki body."""
    shape = json_shape(data)
    if shape in ("otlp", "loki", "alertmanager"):
        raise wrong_endpoint(shape, INGEST)
    return "array" if data.lstrip()[:1] == b"[" else None


def decode_array(data: bytes, received_ns: int, charge: Charge = UNLIMITED) -> Any:
    """A JSON array of events posted to ``/v1/ingest`` under an NDJSON/JSON media type."""
    return _table(JSON_ARRAY, generic.json_array(data), "", data, received_ns, charge)


def decode(code: int, stored: bytes, encoding: int, received_ns: int, limit: int, charge: Charge = UNLIMITED) -> Any:
    """The record table of a shipper request as the WAL stored it."""
    key, body = unwrap(stored)
    data = decompress(body, encoding, limit, charge)
    charge_json(data, charge)
    if code == JSON_ARRAY:
        shape = json_shape(data)
        if shape in ("otlp", "loki", "alertmanager"):
            raise wrong_endpoint(shape, INGEST)
        if data.lstrip()[:1] == b"[":
            found = generic.json_array(data)
        else:
            found = (generic.event_row(event) for event in _ndjson_events(data))
    elif code == MSGPACK:
        shape = json_shape(data)
        if shape is not None:
            raise IngestError(400, "bad_body", f"body is JSON, not msgpack: send it as application/json "
                              f"(to {_SHAPE_ENDPOINT[shape]})")
        found = generic.msgpack_events(data, charge)
    elif code in (OTLP_PROTOBUF, OTLP_JSON):
        found = otlp.rows(_otlp_request(code, data, limit, charge))
    elif code in (LOKI_PROTOBUF, LOKI_JSON):
        found = loki_push.rows(_loki_entries(code, data, limit, charge))
    else:
        raise IngestError(400, "bad_body", f"unknown shipper body code {code}")
    return _table(code, found, key, data, received_ns, charge)


def charge_protobuf(data: bytes, path: tuple[int, ...], charge: Charge, what: str) -> None:
    """Count a protobuf body's records on the wire (protobuf_count) and charge them before parsing."""
    records = protobuf_count.count(data, path, charge.count_limit(PROTOBUF_FACTOR))
    charge.records(records, what)
    charge.estimate(records, len(data), what, PROTOBUF_FACTOR)


def _ndjson_events(data: bytes) -> list[dict[str, Any]]:
    events = []
    for number, line in enumerate(data.split(b"\n")):
        if line.strip():
            try:
                event = json.loads(line)
            except (ValueError, RecursionError) as exc:
                raise IngestError(400, "bad_body", f"line {number + 1}: not a JSON object ({str(exc)[:120]})") from None
            if not isinstance(event, dict):
                raise IngestError(400, "bad_body", f"line {number + 1}: expected a JSON object")
            events.append(event)
    return events


def _otlp_request(code: int, data: bytes, limit: int, charge: Charge) -> dict[str, Any]:
    shape = json_shape(data)
    if shape not in (None, "otlp"):
        raise wrong_endpoint(shape, OTLP_LOGS)
    if code == OTLP_JSON or shape == "otlp":
        if shape is None:
            raise IngestError(400, "bad_body", "body is not OTLP/JSON (not a JSON object with resourceLogs)")
        return otlp.parse_json(data)
    charge_protobuf(data, protobuf_count.OTLP_LOG_RECORDS, charge, "OTLP body")
    try:
        return otlp.parse_protobuf(data)
    except IngestError as exc:
        if exc.status != 400:
            raise
        other = binary_shape(data, limit, charge)
        if other is not None:
            raise wrong_endpoint(other, OTLP_LOGS) from None
        raise


def _loki_entries(code: int, data: bytes, limit: int, charge: Charge) -> list:
    shape = json_shape(data)
    if shape not in (None, "loki"):
        raise wrong_endpoint(shape, LOKI_PUSH)
    if code == LOKI_JSON or shape == "loki":
        if shape is None:
            raise IngestError(400, "bad_body", 'body is not Loki push JSON (not a JSON object with "streams")')
        return list(loki_push.parse_json(data))
    if data[:4] == b"\xff\xff\xff\xff":
        raise wrong_endpoint("arrow", LOKI_PUSH)
    try:
        request = loki_push.snappy_block(data, limit, charge)
        charge_protobuf(request, protobuf_count.LOKI_ENTRIES, charge, "Loki body")
        return list(loki_push.parse_protobuf(request))
    except IngestError as exc:
        if exc.status == 400 and _is_otlp_protobuf(data, charge):
            raise wrong_endpoint("otlp", LOKI_PUSH) from None
        raise


def _is_otlp_protobuf(data: bytes, charge: Charge) -> bool:
    charge_protobuf(data, protobuf_count.OTLP_LOG_RECORDS, charge, "body")
    try:
        request = otlp.parse_protobuf(data)
    except IngestError:
        return False
    return bool(request.get("resourceLogs"))


def _table(code: int, found: Any, key: str, data: bytes, received_ns: int, charge: Charge) -> Any:
    shape, source, fmt = _ORIGIN[code]
    defaults = {"ts": received_ns, "host": "unknown", "ip": "", "source": source, "format": fmt}
    rows = list(found)
    charge.records(len(rows), f"{shape} body")
    return to_table(rows, batch_source_id(shape, key, data), defaults)



def decode_body(stored: bytes, code: int, encoding: int, received_ns: int, limit: int,
                charge: Charge = UNLIMITED) -> Any:
    """The record table of any request as the WAL stored it: what the pipeline and WAL replay call.
    What decoding holds is charged to `charge` as it goes (ranklog.archive.ingest_budget)."""
    if code in SHIPPER_CODES:
        return decode(code, stored, encoding, received_ns, limit, charge)
    if code == CONTENT_TYPES[NDJSON]:
        data = decompress(stored, encoding, limit, charge)
        charge_json(data, charge)
        if check_ingest_json(data) == "array":
            return decode_array(data, received_ns, charge)
        return decode_native(data, code, 0, received_ns, limit, charge)  # already decompressed
    return decode_native(stored, code, encoding, received_ns, limit, charge)
