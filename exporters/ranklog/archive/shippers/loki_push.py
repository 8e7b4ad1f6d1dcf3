"""Loki push (``POST /loki/api/v1/push``) → record rows: snappy-compressed protobuf ``PushRequest``
(``Content-Type: application/x-protobuf``) or JSON, both of Loki's HTTP API reference.

JSON: ``{"streams": [{"stream": {labels}, "values": [["<ns>", "<line>", {structured metadata}?], …]}]}``
and the legacy ``{"streams": [{"labels": "{a=\\"b\\"}", "entries": [{"ts": "<RFC 3339>", "line": …}]}]}``
that python-logging-loki still sends by default. Protobuf: ``logproto.PushRequest`` from Loki's
``pkg/push/push.proto`` (streams = 1; StreamAdapter: labels = 1, entries = 2; EntryAdapter: timestamp
= 1, line = 2, structuredMetadata = 3), built here from descriptors, so no generated code is needed.

Mapping: the line → msg; the entry's timestamp → ts; stream labels and structured metadata through
:mod:`.mapping` (``host``/``hostname``/``instance`` → host, ``job`` → job, ``rank``, ``local_rank``,
``role``, ``trace_id``, ``logger``; ``level``/``severity``/``detected_level`` → level, normalised);
every other label and metadata pair → ``attrs``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from ...record import parse_ts
from ..ingest import IngestError
from ..ingest_budget import UNLIMITED, Charge
from .mapping import take_fields

_LABEL_PAIR = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_.]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')


def bad(message: str) -> IngestError:
    return IngestError(400, "bad_body", message)


@lru_cache(maxsize=1)
def push_request_class() -> Any:
    """``logproto.PushRequest`` as a protobuf message class, from Loki's field numbers."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

    pool = descriptor_pool.DescriptorPool()
    timestamp_file = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(timestamp_file)
    pool.Add(timestamp_file)
    proto = descriptor_pb2.FileDescriptorProto(name="ranklog/loki_push.proto", package="logproto", syntax="proto3",
                                               dependency=["google/protobuf/timestamp.proto"])
    f = descriptor_pb2.FieldDescriptorProto
    repeated, optional = f.LABEL_REPEATED, f.LABEL_OPTIONAL

    def message(name: str, *fields: tuple[str, int, int, int, str]) -> None:
        described = proto.message_type.add(name=name)
        for field_name, number, label, kind, type_name in fields:
            added = described.field.add(name=field_name, number=number, label=label, type=kind)
            if type_name:
                added.type_name = type_name

    message("LabelPairAdapter", ("name", 1, optional, f.TYPE_STRING, ""), ("value", 2, optional, f.TYPE_STRING, ""))
    message("EntryAdapter", ("timestamp", 1, optional, f.TYPE_MESSAGE, ".google.protobuf.Timestamp"),
            ("line", 2, optional, f.TYPE_STRING, ""),
            ("structuredMetadata", 3, repeated, f.TYPE_MESSAGE, ".logproto.LabelPairAdapter"))
    message("StreamAdapter", ("labels", 1, optional, f.TYPE_STRING, ""),
            ("entries", 2, repeated, f.TYPE_MESSAGE, ".logproto.EntryAdapter"), ("hash", 3, optional, f.TYPE_UINT64, ""))
    message("PushRequest", ("streams", 1, repeated, f.TYPE_MESSAGE, ".logproto.StreamAdapter"),
            ("format", 2, optional, f.TYPE_STRING, ""))
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("logproto.PushRequest"))


def snappy_block(data: bytes, limit: int, charge: Charge = UNLIMITED) -> bytes:
    """Snappy block-format decompression, refusing (413) what would inflate past `limit` or the
    request's memory budget (the block declares its decompressed length up front)."""
    import cramjam

    length, shift, position = 0, 0, 0
    while position < len(data) and position < 10:
        byte = data[position]
        length |= (byte & 0x7F) << shift
        position += 1
        if not byte & 0x80:
            break
        shift += 7
    else:
        raise bad("body is not snappy-compressed (Loki push protobuf bodies are)")
    if length > limit:
        raise IngestError(413, "too_large", f"decoded body exceeds {limit} bytes")
    charge.add(length, "decoded Loki body")
    try:
        return bytes(cramjam.snappy.decompress_raw(data))
    except Exception as exc:  # cramjam raises its own DecompressionError
        raise bad(f"body is not snappy-compressed (Loki push protobuf bodies are): {str(exc)[:120]}") from None


def parse_protobuf(data: bytes) -> Iterator[tuple[dict[str, str], int | None, str, dict[str, str]]]:
    """(labels, ts ns, line, structured metadata) of each entry of a decompressed ``PushRequest``."""
    from google.protobuf.message import DecodeError

    request = push_request_class()()
    try:
        request.ParseFromString(data)
    except (DecodeError, ValueError, RecursionError) as exc:
        raise bad(f"body is not a Loki PushRequest (protobuf): {str(exc)[:160]}") from None
    for stream in request.streams:
        labels = parse_labels(stream.labels)
        for entry in stream.entries:
            ts = entry.timestamp.seconds * 10**9 + entry.timestamp.nanos if entry.HasField("timestamp") else None
            yield labels, ts, entry.line, {pair.name: pair.value for pair in entry.structuredMetadata}


def parse_labels(text: str) -> dict[str, str]:
    """``{a="b", c="d"}`` → dict; 400 when it is not a label set."""
    inner = text.strip()
    if not (inner.startswith("{") and inner.endswith("}")):
        raise bad(f"stream labels must look like {{name=\"value\"}}, got {text[:80]!r}")
    inner, labels, position = inner[1:-1], {}, 0
    while position < len(inner.rstrip()):
        match = _LABEL_PAIR.match(inner, position)
        if match is None:
            raise bad(f"stream labels must look like {{name=\"value\"}}, got {text[:80]!r}")
        labels[match.group(1)] = json.loads('"' + match.group(2) + '"')
        position = match.end()
    return labels


def parse_json(data: bytes) -> Iterator[tuple[dict[str, str], int | None, str, dict[str, str]]]:
    try:
        decoded = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise bad(f"body is not Loki push JSON: {str(exc)[:160]}") from None
    if not isinstance(decoded, dict) or not isinstance(decoded.get("streams"), list):
        raise bad('body is not Loki push JSON (no "streams" list)')
    for stream in decoded["streams"]:
        if not isinstance(stream, dict):
            raise bad("streams: expected objects")
        if "stream" in stream or "values" in stream:
            labels = stream.get("stream") or {}
            if not isinstance(labels, dict):
                raise bad('"stream" must be an object of labels')
            labels = {str(k): str(v) for k, v in labels.items()}
            for value in stream.get("values") or []:
                if not isinstance(value, list) or len(value) not in (2, 3) or not isinstance(value[1], str):
                    raise bad('each of "values" must be ["<unix epoch in nanoseconds>", "<log line>", {metadata}?]')
                metadata = value[2] if len(value) == 3 else {}
                if not isinstance(metadata, dict):
                    raise bad("structured metadata must be an object")
                yield labels, _ns(value[0]), value[1], {str(k): str(v) for k, v in metadata.items()}
        else:
            labels = parse_labels(str(stream.get("labels", "")))
            for entry in stream.get("entries") or []:
                if not isinstance(entry, dict) or not isinstance(entry.get("line"), str):
                    raise bad('each of "entries" must be {"ts": "<RFC 3339>", "line": "<log line>"}')
                yield labels, parse_ts(entry.get("ts")), entry["line"], {}


def _ns(value: Any) -> int | None:
    if isinstance(value, str) and value.isdigit():
        return int(value)
    raise bad(f'a Loki timestamp is a string of Unix epoch nanoseconds, got {str(value)[:40]!r}')


def rows(entries: Iterator[tuple[dict[str, str], int | None, str, dict[str, str]]]) -> Iterator[dict[str, Any]]:
    for labels, ts, line, metadata in entries:
        fields, rest = take_fields({**labels, **metadata})
        row: dict[str, Any] = {**fields, "msg": line, "attrs": rest or None}
        if ts is not None:
            row["ts"] = ts
        yield row
