"""Shipper request bodies encoded from the documented wire formats, independently of the archive's
decoders: Loki's ``PushRequest`` protobuf (hand-encoded from ``pkg/push/push.proto``'s field numbers,
snappy block-compressed) and OTLP/JSON (the OTLP specification's JSON mapping)."""

from __future__ import annotations

import json


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def length_delimited(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def push_request(labels: str, entries: list[tuple[int, str, dict[str, str]]]) -> bytes:
    """logproto.PushRequest: streams=1 {labels=1, entries=2 {timestamp=1 {seconds=1, nanos=2}, line=2,
    structuredMetadata=3 {name=1, value=2}}} (uncompressed)."""
    encoded = b""
    for ts, line, metadata in entries:
        stamp = varint(1 << 3) + varint(ts // 10**9) + varint(2 << 3) + varint(ts % 10**9)
        entry = length_delimited(1, stamp) + length_delimited(2, line.encode())
        for name, value in metadata.items():
            entry += length_delimited(3, length_delimited(1, name.encode()) + length_delimited(2, value.encode()))
        encoded += length_delimited(2, entry)
    return length_delimited(1, length_delimited(1, labels.encode()) + encoded)


def loki_protobuf(labels: str, entries: list[tuple[int, str, dict[str, str]]]) -> bytes:
    """What Promtail/Alloy post: a snappy (block format) compressed PushRequest."""
    import cramjam

    return bytes(cramjam.snappy.compress_raw(push_request(labels, entries)))


def otlp_json(message: str, ts_ns: int, rank: int, job: str, host: str = "gpu-node-008",
              trace_id: str = "5b8efff798038103d269b633813fc60c") -> bytes:
    """One log record in OTLP/JSON: lowerCamelCase keys, 64-bit integers as strings, hex ids."""
    record = {"timeUnixNano": str(ts_ns), "severityNumber": 17, "body": {"stringValue": message},
              "attributes": [{"key": "rank", "value": {"intValue": str(rank)}},
                             {"key": "gpu", "value": {"kvlistValue": {"values": [{"key": "id", "value": {"intValue": "3"}}]}}}]}
    if trace_id:
        record.update(traceId=trace_id, spanId="eee19b7ec3c1b174")
    return json.dumps({"resourceLogs": [{
        "resource": {"attributes": [{"key": "host.name", "value": {"stringValue": host}},
                                    {"key": "training_job", "value": {"stringValue": job}}]},
        "scopeLogs": [{"scope": {"name": "ray.worker"}, "logRecords": [record]}],
    }]}).encode()


def otlp_protobuf(message: str, ts_ns: int, rank: int, job: str) -> bytes:
    """The same record as a protobuf ExportLogsServiceRequest (via the opentelemetry-proto classes)."""
    from google.protobuf.json_format import Parse
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    body = otlp_json(message, ts_ns, rank, job, trace_id="")
    return Parse(body.decode(), ExportLogsServiceRequest()).SerializeToString()
