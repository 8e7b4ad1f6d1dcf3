"""What the HTTP layer needs per ingest endpoint: the request's WAL code, the body the WAL stores,
and the success answer each shipper expects (OTLP: an empty ``ExportLogsServiceResponse`` in the
request's encoding; Loki: ``204 No Content``, which python-logging-loki checks for; ``/v1/ingest``:
``{"accepted": N, "duplicates": M}``)."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.responses import JSONResponse, Response

from ..ingest import CONTENT_TYPES, NDJSON, content_type_code
from .batch import IDEMPOTENCY_HEADER, wrap
from .dispatch import INGEST, JSON_ARRAY, LOKI_PUSH, OTLP_LOGS, OTLP_PROTOBUF, SHIPPER_CODES, endpoint_code, ingest_code

ENDPOINTS = (INGEST, OTLP_LOGS, LOKI_PUSH)


def request_code(endpoint: str, headers: Mapping[str, str]) -> int:
    """The WAL code for this request (IngestError 400/415 for what the endpoint does not take)."""
    if endpoint != INGEST:
        return endpoint_code(endpoint, headers.get("content-type"))
    code = ingest_code(headers.get("content-type"))
    if code is None:
        code = content_type_code(headers.get("content-type"))
        if code == CONTENT_TYPES[NDJSON] and headers.get(IDEMPOTENCY_HEADER):
            code = JSON_ARRAY  # keyed by the header: the shipper decoder handles NDJSON and arrays
    return code


def stored_body(code: int, headers: Mapping[str, str], body: bytes) -> bytes:
    return wrap(headers.get(IDEMPOTENCY_HEADER), body) if code in SHIPPER_CODES else body


def answer(endpoint: str, code: int, accepted: int, duplicates: int, repaired: int = 0) -> Response:
    if endpoint == OTLP_LOGS:
        if code == OTLP_PROTOBUF:
            return Response(b"", media_type="application/x-protobuf")  # an empty ExportLogsServiceResponse
        return JSONResponse({})
    if endpoint == LOKI_PUSH:
        return Response(status_code=204)
    body = {"accepted": accepted, "duplicates": duplicates}
    if repaired:  # records kept with unusable values moved to attrs (archive.ingest_values)
        body["repaired"] = repaired
    return JSONResponse(body)
