"""The refusal every ingest decoder raises (its own module: the memory budget and the decoders share it)."""

from __future__ import annotations


class IngestError(Exception):
    """A request the archive refuses; `status` is the HTTP answer, `reason` the metric label."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason


def bad(message: str) -> IngestError:
    return IngestError(400, "bad_body", message)
