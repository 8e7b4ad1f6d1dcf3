"""Rows from a shipper's batch → a record table, with the keys that make a retried batch a duplicate.

Shippers are at-least-once: a batch whose answer was lost is sent again. Each row's idempotency key
(``source_id``, ``offset``) is therefore derived from the batch, never from the time it arrived:

- with an ``Idempotency-Key`` request header: ``source_id = "body:key:" + sha256(key)[:32]``;
- otherwise the batch content hash: ``source_id = "body:<shape>:" + sha256(decoded body)[:32]``;

and ``offset`` is the row's position in the batch. A byte-identical retry (what the OpenTelemetry
exporter, Loki clients, Vector and Fluent Bit send) or any retry carrying the same key is then
dropped by the archive's de-duplication, and the same line in a *different* batch is a new record.
These keys are remembered for ``dedup_body_window`` (default 24 h), like key-less NDJSON bodies.

The WAL must replay a request into exactly the same rows, so the header travels with the body:
:func:`wrap` prefixes the key (``RLK1`` + u16 length + key) to the body the WAL stores.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Mapping
from typing import Any

from ...record import REQUIRED, normalize_row, records_table
from ..ingest import SHIPPER_KEY_PREFIX, IngestError

IDEMPOTENCY_HEADER = "idempotency-key"
MAX_KEY_BYTES = 256
_MAGIC = b"RLK1"
_LENGTH = struct.Struct("<H")


def wrap(key: str | None, body: bytes) -> bytes:
    """The body as the WAL stores it for shipper endpoints: the idempotency key (maybe empty) first."""
    raw = (key or "").encode("utf-8", "surrogateescape")
    if len(raw) > MAX_KEY_BYTES:
        raise IngestError(400, "bad_body", f"Idempotency-Key is longer than {MAX_KEY_BYTES} bytes")
    return _MAGIC + _LENGTH.pack(len(raw)) + raw + body


def unwrap(stored: bytes) -> tuple[str, bytes]:
    """(key, body) from :func:`wrap`'s output."""
    if stored[:4] != _MAGIC or len(stored) < 6:
        raise IngestError(400, "bad_body", "stored shipper body has no key envelope")
    (length,) = _LENGTH.unpack_from(stored, 4)
    return stored[6:6 + length].decode("utf-8", "surrogateescape"), stored[6 + length:]


def batch_source_id(shape: str, key: str, data: bytes) -> str:
    if key:
        return SHIPPER_KEY_PREFIX + "key:" + hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return SHIPPER_KEY_PREFIX + shape + ":" + hashlib.sha256(data).hexdigest()[:32]


def to_table(rows: Iterable[Mapping[str, Any]], source_id: str, defaults: Mapping[str, Any]) -> Any:
    """The record table of `rows` (record field names; anything else goes to ``attrs``)."""
    import pyarrow as pa

    normalized = []
    for offset, row in enumerate(rows):
        record = normalize_row({k: v for k, v in row.items() if k not in ("source_id", "offset")}, defaults)
        given = {k: row[k] for k in ("source_id", "offset") if k in row}
        if given:
            record["attrs"] = _with_given(record.get("attrs"), given)
        for name in REQUIRED:
            if record.get(name) is None:
                record[name] = defaults.get(name, "")
        record["source_id"], record["offset"] = source_id, offset
        normalized.append(record)
    try:
        return records_table(normalized)
    except (pa.ArrowException, OverflowError, UnicodeError) as exc:
        raise IngestError(400, "bad_body", f"batch cannot be stored: {str(exc).splitlines()[0][:200]}") from None


def _with_given(attrs: str | None, given: dict[str, Any]) -> str:
    import json

    merged = json.loads(attrs) if attrs else {}
    merged.update({f"given_{k}": v for k, v in given.items()})
    return json.dumps(merged, default=str, ensure_ascii=False, separators=(",", ":"))
