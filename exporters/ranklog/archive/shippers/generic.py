"""The generic shippers' default HTTP payloads → record rows: Vector's ``http`` sink (a JSON array of
events) and Fluent Bit's ``http`` output (``format msgpack``, its default; ``json``, an array; and
``json_lines``, which takes the NDJSON path of ``/v1/ingest``).

Each event is an object read like an NDJSON line: record field names are taken as they are, and when
the canonical key is absent ``message``/``log`` → msg, ``timestamp``/``time``/``@timestamp``/``date``
→ ts (Fluent Bit's ``date`` is epoch seconds as a float, or ISO 8601 with ``json_date_format iso8601``),
``severity`` → level, and :mod:`.mapping`'s names (``hostname`` → host, …); the rest goes to ``attrs``.
Fluent Bit's msgpack events are ``[timestamp, record]`` or, since 2.1, ``[[timestamp, metadata],
record]``, with the timestamp an EventTime extension (type 0: u32 seconds, u32 nanoseconds) or a number.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from typing import Any

from ..ingest import IngestError
from ..ingest_budget import ROW_COST, UNLIMITED, Charge
from .mapping import take_fields

ALIASES = {"msg": ("message", "log"), "ts": ("timestamp", "time", "@timestamp", "date"), "level": ("severity",)}
_EVENT_TIME = struct.Struct(">II")
_CHARGE_EVERY = 1024  # maps/arrays (and events) between two budget checks


def bad(message: str) -> IngestError:
    return IngestError(400, "bad_body", message)


def event_row(event: dict[str, Any]) -> dict[str, Any]:
    row = {str(k): v for k, v in event.items()}
    for canonical, aliases in ALIASES.items():
        if canonical not in row:
            for alias in aliases:
                if alias in row:
                    row[canonical] = row.pop(alias)
                    break
    fields, rest = take_fields({k: v for k, v in row.items() if k not in ("ts", "msg", "level")})
    return {**{k: row[k] for k in ("ts", "msg", "level") if k in row}, **fields, **rest}


def json_array(data: bytes) -> Iterator[dict[str, Any]]:
    try:
        decoded = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise bad(f"body is not a JSON array of events: {str(exc)[:160]}") from None
    if not isinstance(decoded, list):
        raise bad("body is not a JSON array of events")
    for number, event in enumerate(decoded):
        if not isinstance(event, dict):
            raise bad(f"event {number}: expected a JSON object, got {type(event).__name__}")
        yield event_row(event)


def _ext_hook(code: int, data: bytes) -> Any:
    import msgpack

    if code == 0 and len(data) == 8:
        seconds, nanos = _EVENT_TIME.unpack(data)
        return seconds * 10**9 + nanos
    return msgpack.ExtType(code, data)


def _ns(value: Any) -> Any:
    if isinstance(value, bool):
        return None
    if isinstance(value, int) and value > 10**15:
        return value  # an EventTime, already nanoseconds
    if isinstance(value, (int, float)):
        return round(value * 1e9)
    return None


def msgpack_events(data: bytes, charge: Charge = UNLIMITED) -> Iterator[dict[str, Any]]:
    """The events of a msgpack body. Every map and array the unpacker makes is charged to the request's
    memory budget as it is made (so 8 KB of ``0x80``, two million empty maps, stop at the budget)."""
    import msgpack

    made = 0

    def counted(value: Any) -> Any:
        nonlocal made
        made += 1
        if not made % _CHARGE_EVERY:
            charge.add(_CHARGE_EVERY * ROW_COST, "msgpack body")
        return value

    charge.estimate(0, len(data), "msgpack body")
    unpacker = msgpack.Unpacker(raw=False, ext_hook=_ext_hook, strict_map_key=False, unicode_errors="surrogateescape",
                                max_buffer_size=max(len(data), 1), object_hook=counted, list_hook=counted)
    items = []
    try:
        unpacker.feed(data)
        for item in unpacker:
            items.append(item)
            if not len(items) % _CHARGE_EVERY:
                charge.records(len(items), "msgpack body")
    except (msgpack.UnpackException, ValueError, TypeError) as exc:
        raise bad(f"body is not msgpack: {str(exc)[:160]}") from None
    if not items:
        raise bad("body is empty msgpack")
    for number, item in enumerate(items):
        if isinstance(item, dict):  # a bare record map
            yield event_row(item)
            continue
        if not (isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[1], dict)):
            raise bad(f"msgpack event {number}: expected [timestamp, record] or [[timestamp, metadata], record]")
        head, record = item
        metadata = {}
        if isinstance(head, (list, tuple)) and head:
            metadata = head[1] if len(head) > 1 and isinstance(head[1], dict) else {}
            head = head[0]
        row = event_row(record)
        ts = _ns(head)
        if ts is not None and "ts" not in row:
            row["ts"] = ts
        if metadata:
            row["fluent_bit_metadata"] = metadata
        yield row
