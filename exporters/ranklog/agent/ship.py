"""Shipping: batch parsed chunks into requests and POST them to an archive until one acknowledges.

A request is an Arrow IPC stream (lz4- or zstd-compressed buffers) of the chunks' record batches, sent as
``POST <url>/v1/ingest`` with the bearer token. Requests are cut per preferred endpoint when they
hold ``batch_bytes`` raw bytes or their oldest chunk waited ``batch_latency``. ``senders`` threads
send concurrently. A request is never dropped: every failure is counted by reason and retried on the
next available endpoint (see :mod:`.endpoints`); a 413 splits it into smaller bodies. Only a 2xx
acknowledges, and only then are its chunks handed back (``on_ack``) to advance checkpoints.
"""

from __future__ import annotations

import io
import logging
import queue
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .chunk import Chunk
from .endpoints import Endpoints, parse_retry_after

log = logging.getLogger("ranklog.agent.ship")
CONTENT_TYPE = "application/vnd.apache.arrow.stream"
_RETRYABLE_STATUS_REASON = {429: "throttled", 503: "unavailable", 507: "disk_full"}


@dataclass
class Request:
    preferred: int
    chunks: list[Chunk] = field(default_factory=list)
    nbytes: int = 0
    rows: int = 0
    started: float = field(default_factory=time.monotonic)


def encode(batches: list, schema, compression: str = "lz4") -> bytes:
    """One Arrow IPC stream with compressed buffers (lz4 or zstd; see AgentConfig.compression)."""
    import pyarrow as pa

    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, schema, options=pa.ipc.IpcWriteOptions(compression=compression)) as writer:
        for batch in batches:
            writer.write_batch(batch if batch.schema.equals(schema) else batch.cast(schema))
    return sink.getvalue()


class Shipper:
    def __init__(self, cfg, metrics, on_ack: Callable[[list[Chunk]], None], schema) -> None:
        self._cfg = cfg
        self._metrics = metrics
        self._on_ack = on_ack
        self._schema = schema
        self.endpoints = Endpoints(cfg.archive, cfg.backoff_initial, cfg.backoff_max, cfg.unauthorized_retry)
        self._open: dict[int, Request] = {}
        self._queue: queue.Queue[Request | None] = queue.Queue()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._busy = 0
        self._busy_lock = threading.Lock()

    # --- batching (called from the main loop only) ---------------------------------------------

    def submit(self, chunk: Chunk) -> None:
        index = self.endpoints.preferred(chunk.key)
        request = self._open.get(index)
        if request is None:
            request = self._open[index] = Request(index)
        request.chunks.append(chunk)
        request.nbytes += chunk.nbytes
        request.rows += chunk.rows
        if request.nbytes >= self._cfg.batch_bytes:
            self._send(self._open.pop(index))

    def tick(self, force: bool = False) -> None:
        """Cut requests whose oldest chunk has waited `batch_latency` (all of them when `force`)."""
        now = time.monotonic()
        for index in list(self._open):
            if force or now - self._open[index].started >= self._cfg.batch_latency:
                self._send(self._open.pop(index))

    def _send(self, request: Request) -> None:
        if request.rows == 0:
            # Nothing to store (blank lines, a record still pending): acknowledged without a round trip.
            self._on_ack(request.chunks)
            return
        self._queue.put(request)

    @property
    def idle(self) -> bool:
        return not self._open and self._queue.empty() and self._busy == 0

    # --- sending (sender threads) ----------------------------------------------------------------

    def start(self) -> None:
        for number in range(self._cfg.senders):
            thread = threading.Thread(target=self._run, name=f"ranklog-sender-{number}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        for _ in self._threads:
            self._queue.put(None)
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _client(self):
        import httpx

        verify: object = self._cfg.tls_verify
        if self._cfg.tls_verify and self._cfg.tls_ca:
            verify = ssl.create_default_context(cafile=self._cfg.tls_ca)
        return httpx.Client(timeout=self._cfg.request_timeout, verify=verify,
                            limits=httpx.Limits(max_connections=len(self.endpoints.items) * 2))

    def _run(self) -> None:
        with self._client() as client:
            while True:
                request = self._queue.get()
                if request is None:
                    return
                with self._busy_lock:
                    self._busy += 1
                try:
                    if self._deliver(client, request):
                        self._on_ack(request.chunks)
                finally:
                    with self._busy_lock:
                        self._busy -= 1

    def _bodies(self, request: Request, parts: int) -> list[bytes]:
        """The request's records as `parts` bodies of about equal row counts."""
        batches = [c.batch for c in request.chunks if c.rows]
        if parts <= 1:
            return [encode(batches, self._schema, self._cfg.compression)]
        import pyarrow as pa

        table = pa.Table.from_batches([b if b.schema.equals(self._schema) else b.cast(self._schema) for b in batches],
                                      schema=self._schema)
        step = max(1, -(-table.num_rows // parts))
        return [encode(table.slice(i, step).to_batches(), self._schema, self._cfg.compression)
                for i in range(0, table.num_rows, step)]

    def _deliver(self, client, request: Request) -> bool:
        """Send until acknowledged; False only when the agent is stopping."""
        parts = 1
        bodies = self._bodies(request, parts)
        sent = 0  # bodies of this request already acknowledged
        while not self._stop.is_set():
            index, wait = self.endpoints.choose(request.preferred)
            if index is None:
                self._stop.wait(min(wait, 1.0))
                continue
            status = self._post(client, index, bodies[sent])
            if status is not None and 200 <= status < 300:
                self.endpoints.succeeded(index)
                sent += 1
                if sent == len(bodies):
                    self._metrics.agent_records_shipped.inc(request.rows)
                    self._metrics.agent_ship_seconds.observe(time.monotonic() - request.started)
                    return True
            elif status == 413:
                if parts >= request.rows:
                    self._fail(index, "too_large", None, "a single record is larger than the archive accepts")
                    continue
                parts *= 2
                log.warning("archive %s: request too large (413); splitting it into %d parts",
                            self.endpoints.items[index].url, parts)
                bodies, sent = self._bodies(request, parts), 0
        return False

    def _post(self, client, index: int, body: bytes) -> int | None:
        """POST one body; failures are counted and back the endpoint off. The status, or None."""
        import httpx

        endpoint = self.endpoints.items[index]
        try:
            token = self._cfg.token()
        except ValueError as exc:
            self._fail(index, "token", None, str(exc))
            return None
        try:
            response = client.post(f"{endpoint.url}/v1/ingest", content=body,
                                   headers={"Content-Type": CONTENT_TYPE, "Authorization": f"Bearer {token}"})
        except httpx.TimeoutException as exc:
            self._fail(index, "timeout", None, repr(exc))
            return None
        except httpx.HTTPError as exc:
            tls = isinstance(exc.__context__, ssl.SSLError) or "CERTIFICATE_VERIFY_FAILED" in str(exc)
            self._fail(index, "tls" if tls else "connect", None, repr(exc))
            return None
        status = response.status_code
        if 200 <= status < 300:
            return status
        if status in (401, 403):
            self._metrics.agent_ship_failures.labels(reason="unauthorized").inc()
            self.endpoints.refused_token(index)
            return status
        if status == 413:
            self._metrics.agent_ship_failures.labels(reason="too_large").inc()
            return status
        retry_after = parse_retry_after(response.headers.get("Retry-After")) if status in _RETRYABLE_STATUS_REASON else None
        reason = _RETRYABLE_STATUS_REASON.get(status, "http_5xx" if status >= 500 else "rejected")
        self._fail(index, reason, retry_after, f"HTTP {status}: {response.text[:200]}")
        return status

    def _fail(self, index: int, reason: str, retry_after: float | None, detail: str) -> None:
        self._metrics.agent_ship_failures.labels(reason=reason).inc()
        delay = self.endpoints.failed(index, retry_after)
        level = logging.ERROR if reason in ("rejected", "token", "tls") else logging.WARNING
        log.log(level, "shipping to %s failed (%s: %s); retrying in %.2fs, nothing is dropped",
                self.endpoints.items[index].url, reason, detail, delay)
