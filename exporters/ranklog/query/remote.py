"""Query a running archive over HTTP (``--archive https://host:port``): the client side of
``GET/POST /v1/query`` (served by :mod:`ranklog.archive.query_api`).

The spec is sent as JSON; the answer streams back as Arrow IPC and is read batch by batch, so a
large result never has to fit in memory on either side. A 401/403, an unreachable server or a
server-side error becomes one :class:`~ranklog.errors.UserError` line.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..errors import UserError

if TYPE_CHECKING:
    import httpx
    import pyarrow as pa

    from .filters import QuerySpec

ARROW_STREAM = "application/vnd.apache.arrow.stream"
ROW_LIMIT_HEADER = "x-ranklog-row-limit"
# JSON {path: why} of the archive files the answer had to skip as unreadable (ASCII: a header value)
WARNINGS_HEADER = "x-ranklog-unreadable-files"


class _ResponseStream(io.RawIOBase):
    """A readable file over an httpx streaming response, for ``pyarrow.ipc.open_stream``."""

    def __init__(self, response: httpx.Response) -> None:
        self._chunks = response.iter_bytes()
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._pending = chunk
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size


def _error_text(response: httpx.Response) -> str:
    try:
        response.read()
        body = response.json()
        return str(body.get("error") or body)
    except Exception:  # the body may be anything (a proxy's HTML page…)
        return (response.text or response.reason_phrase or "").strip().splitlines()[0][:200] if response.text else ""


class RemoteSource:
    """A running archive that answers ``/v1/query`` (same bearer token as ingest)."""

    kind = "remote"

    def __init__(self, url: str, token: str | None, timeout: float = 300.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.unreadable: dict[str, str] = {}  # files the archive skipped for its answers: path → why

    def _note_skipped(self, skipped: Any) -> None:
        import json

        if isinstance(skipped, str):
            try:
                skipped = json.loads(skipped)
            except ValueError:
                return
        for path, why in (skipped or {}).items():
            if path not in self.unreadable:
                self.unreadable[path] = str(why)
                print(f"ranklog: warning: the archive skipped unreadable file {path} ({why})", file=sys.stderr)

    def describe(self) -> str:
        return f"archive {self.url}"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def _check(self, response: httpx.Response) -> None:
        if response.status_code in (401, 403):
            hint = "check --token-file" if self.token else "give --token-file"
            raise UserError(f"archive {self.url} answered {response.status_code} (not authorized): {hint}")
        if response.status_code == 404:
            raise UserError(f"archive {self.url} has no /v1/query endpoint (is it a ranklog archive?)")
        if response.status_code >= 400:
            detail = _error_text(response)
            raise UserError(f"archive {self.url} answered {response.status_code}" + (f": {detail}" if detail else ""))

    def scan(self, spec: QuerySpec, columns: list[str]) -> Iterator[pa.RecordBatch]:
        import httpx
        import pyarrow as pa

        body = {"spec": spec.to_dict(), "columns": columns, "format": "arrow"}
        rows = 0
        try:
            with httpx.Client(timeout=httpx.Timeout(self.timeout, connect=10.0)) as client, \
                    client.stream("POST", f"{self.url}/v1/query", json=body, headers=self._headers()) as response:
                self._check(response)
                self._note_skipped(response.headers.get(WARNINGS_HEADER))
                reader = pa.ipc.open_stream(io.BufferedReader(_ResponseStream(response), 1 << 20))
                for batch in reader:
                    rows += batch.num_rows
                    yield batch
                cap = response.headers.get(ROW_LIMIT_HEADER)
        except httpx.HTTPError as exc:
            raise UserError(f"cannot reach archive {self.url}: {exc}") from None
        except pa.ArrowInvalid as exc:
            raise UserError(f"archive {self.url} sent a broken answer: {exc}") from None
        if cap is not None and rows >= int(cap) and (spec.limit is None or spec.limit > int(cap)):
            print(f"ranklog: the archive capped the result at {cap} rows (server limit)", file=sys.stderr)

    def follow(self, spec: QuerySpec, columns: list[str], tail: int) -> Iterator[pa.RecordBatch]:
        """``/v1/tail``: the last `tail` records, then new ones as the archive stores them (empty
        heartbeat batches from the server are dropped here)."""
        import httpx
        import pyarrow as pa

        body = {"spec": spec.to_dict(), "columns": columns, "tail": tail}
        try:
            # No read timeout beyond a minute: the server sends a heartbeat batch every look.
            with httpx.Client(timeout=httpx.Timeout(60.0, connect=10.0)) as client, \
                    client.stream("POST", f"{self.url}/v1/tail", json=body, headers=self._headers()) as response:
                if response.status_code == 404:
                    raise UserError(f"archive {self.url} has no /v1/tail endpoint (an older ranklog archive?): "
                                    "query it without --follow")
                self._check(response)
                reader = pa.ipc.open_stream(io.BufferedReader(_ResponseStream(response), 1 << 16))
                for batch in reader:
                    if batch.num_rows:
                        yield batch
        except httpx.HTTPError as exc:
            raise UserError(f"lost archive {self.url}: {exc}") from None
        except pa.ArrowInvalid as exc:
            raise UserError(f"archive {self.url} sent a broken answer: {exc}") from None

    def count(self, spec: QuerySpec) -> int:
        import httpx

        body = {"spec": spec.to_dict(), "count": True}
        try:
            response = httpx.post(f"{self.url}/v1/query", json=body, headers=self._headers(), timeout=self.timeout)
        except httpx.HTTPError as exc:
            raise UserError(f"cannot reach archive {self.url}: {exc}") from None
        self._check(response)
        answer = response.json()
        self._note_skipped(answer.get("unreadable_files"))
        return int(answer["count"])
