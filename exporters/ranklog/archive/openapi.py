"""The OpenAPI 3.1 description served at GET /openapi.json (hand-written: it documents the binary
Arrow body, the headers and every refusal, which a generated schema would not)."""

from __future__ import annotations

from typing import Any

from .. import __version__
from ..record import FIELDS, REQUIRED
from .verdicts.routes import openapi_paths

_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}}


def _refusal(description: str, retry_after: bool = False) -> dict[str, Any]:
    answer: dict[str, Any] = {"description": description,
                              "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    if retry_after:
        answer["headers"] = {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds"}}
    return answer


def _record_schema() -> dict[str, Any]:
    integer = {"ts", "pid", "rank", "local_rank", "step", "seq", "offset"}
    props: dict[str, Any] = {}
    for name in FIELDS:
        if name == "ts":
            props[name] = {"type": ["string", "number"], "description": "RFC 3339 or epoch seconds/ms/µs/ns"}
        elif name in integer:
            props[name] = {"type": ["integer", "null"]}
        elif name == "attrs":
            props[name] = {"type": ["object", "string", "null"], "description": "extra fields"}
        else:
            props[name] = {"type": ["string", "null"]}
    return {"type": "object", "properties": props, "additionalProperties": True,
            "description": "One NDJSON line. Unknown fields go to attrs. Required in the archive (defaults "
                           f"applied when absent): {', '.join(sorted(REQUIRED))}."}


def openapi_document() -> dict[str, Any]:
    ingest_body = {
        "required": True,
        "content": {
            "application/vnd.apache.arrow.stream": {
                "schema": {"type": "string", "format": "binary"},
                "description": "Arrow IPC stream of record batches in the record schema (buffers may be "
                               "zstd/lz4 compressed). Missing nullable columns are allowed; unknown columns "
                               "are refused with 400.",
            },
            "application/x-ndjson": {"schema": {"$ref": "#/components/schemas/NdjsonRecord"}},
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "ranklog archive", "version": __version__,
                 "description": "Durable, exactly-once ingest of training logs into hive-partitioned Parquet."},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": _ERROR,
                "HostRefusal": {"type": "object", "required": ["error", "reason", "hosts"], "properties": {
                    "error": {"type": "string"}, "reason": {"const": "host_not_allowed"},
                    "hosts": {"type": "array", "items": {"type": "string"}}}},
                "NdjsonRecord": _record_schema(),
                "IngestResult": {"type": "object", "required": ["accepted", "duplicates"], "properties": {
                    "accepted": {"type": "integer", "minimum": 0}, "duplicates": {"type": "integer", "minimum": 0}}},
            },
        },
        "paths": {
            "/v1/ingest": {"post": {
                "summary": "Append a batch of records (acknowledged only once durable)",
                "security": [{"bearer": []}],
                "parameters": [{"name": "Content-Encoding", "in": "header", "required": False,
                                "schema": {"type": "string", "enum": ["gzip", "zstd", "identity"]}}],
                "requestBody": ingest_body,
                "responses": {
                    "200": {"description": "stored durably (WAL fsynced); duplicates were already stored",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/IngestResult"}}}},
                    "400": _refusal("body does not decode or does not match the record schema"),
                    "401": _refusal("missing or invalid bearer token"),
                    "403": {"description": "the token is bound to a node identity and the body holds records of "
                                           "hosts it may not write; nothing of the body was stored",
                            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/HostRefusal"}}}},
                    "413": _refusal("body (or its decoded size) exceeds the configured limit"),
                    "415": _refusal("unsupported Content-Type or Content-Encoding"),
                    "429": _refusal("too many concurrent requests", retry_after=True),
                    "503": _refusal("not ready, or Parquet writing is behind", retry_after=True),
                    "507": _refusal("free disk below the configured reserve"),
                },
            }},
            "/healthz": {"get": {"summary": "liveness", "responses": {"200": {"description": "alive"}}}},
            "/readyz": {"get": {"summary": "readiness (WAL replayed, WAL healthy)", "responses": {
                "200": {"description": "ready"}, "503": {"description": "starting or failed"}}}},
            "/metrics": {"get": {"summary": "Prometheus metrics", "responses": {
                "200": {"description": "text exposition format", "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
            "/openapi.json": {"get": {"summary": "this document", "responses": {"200": {"description": "OpenAPI"}}}},
            **openapi_paths(),
        },
    }
