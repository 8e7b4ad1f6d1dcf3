"""Shipping: batch parsed chunks into requests and POST them to an archive until one acknowledges.

A request is an Arrow IPC stream (lz4- or zstd-compressed buffers) of the chunks' record batches, sent as
``POST <url>/v1/ingest`` with the bearer token. Requests are cut per preferred endpoint when they
hold ``batch_bytes`` raw bytes or their oldest chunk waited ``batch_latency`` — or at once when the
reader caught up and a trickle's request rate allows it (:meth:`Shipper.tick`). ``senders`` threads
send concurrently. A request is never dropped: every failure is counted by reason and retried on the
next available endpoint (see :mod:`.endpoints`); a 413 splits it into smaller bodies; a permanent
refusal (400/422) is bisected down to the refused record (see :meth:`Shipper._deliver`); a 403
``host_not_allowed`` (a bound token, records whose line named another host) is sent again under this
node's host (:mod:`.answers`). Only a 2xx acknowledges, and only then are its chunks handed back
(``on_ack``) to advance checkpoints. Each ACK's duplicate count is checked against what this agent
may have sent before (:mod:`.answers`): the rest are unexpected duplicates, counted and logged.
Identity notices (what the agent learned of files whose records it shipped, :mod:`.node_identity`)
go as a request of their own, a body without records whose schema metadata carries them
(:data:`ranklog.source_identity.NOTICES_METADATA_KEY`), retried like any other.
"""

from __future__ import annotations

import io
import json
import logging
import queue
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..record import SPANS_METADATA_KEY
from ..source_identity import NOTICES_METADATA_KEY, notices_json
from .answers import duplicates_in, refused_hosts, rehost
from .chunk import Chunk
from .endpoints import Endpoints, parse_retry_after

log = logging.getLogger("ranklog.agent.ship")
CONTENT_TYPE = "application/vnd.apache.arrow.stream"
_RETRYABLE_STATUS_REASON = {429: "throttled", 503: "unavailable", 507: "disk_full"}
# The archive's answers meaning "this body cannot be stored, whatever you retry": the cause is in the
# records, so the agent isolates it (a 404/405/415 is a configuration error instead: retried, alerted).
PERMANENT_STATUSES = frozenset({400, 422})


@dataclass
class Part:
    """Records of a request still to acknowledge, with their encoded body (built once).

    A request starts as the chunks' record batch messages (:func:`encode_message`, made by the parse
    workers or by the sender); its table is decoded from the body only when it is needed (a refusal
    to split, a duplicate answer to name).
    """

    table: Any = None  # pyarrow.Table; None while the part is only its messages
    quarantined: bool = False
    spans: list[tuple[str, int, int]] | None = None  # byte spans it holds every record of (whole chunks)
    maybe_sent: Any = None  # numpy bool per row: the archive may already hold it (a re-send)
    rehosted: bool = False
    messages: list[bytes] | None = None
    nrows: int = 0
    notices: bytes | None = None  # identity notices (JSON), in a part without records
    _body: bytes | None = None

    @property
    def rows(self) -> int:
        return self.table.num_rows if self.table is not None else self.nrows

    def body(self, schema, compression: str) -> bytes:
        if self._body is None:
            if self.spans:  # lets the archive's exact dedup keep one range per file (record.SPANS_METADATA_KEY)
                schema = schema.with_metadata({SPANS_METADATA_KEY: json.dumps(self.spans, separators=(",", ":"))})
            if self.notices:
                schema = schema.with_metadata({**(schema.metadata or {}), NOTICES_METADATA_KEY: self.notices})
            if self.messages is not None:
                self._body = assemble(schema, self.messages)
            else:
                self._body = encode(self.table.to_batches(), schema, compression)
        return self._body

    def decoded(self, schema, compression: str) -> Part:
        """This part with its table (decoded from the body when it was only messages)."""
        if self.table is None:
            import pyarrow as pa

            self.table = pa.ipc.open_stream(self.body(schema, compression)).read_all()
        return self

    def halves(self) -> list[Part]:
        """Two parts of half the rows each; neither holds a whole chunk, so neither declares spans."""
        middle = -(-self.rows // 2)
        sent = self.maybe_sent
        return [Part(self.table.slice(0, middle), maybe_sent=None if sent is None else sent[:middle],
                     rehosted=self.rehosted),
                Part(self.table.slice(middle), maybe_sent=None if sent is None else sent[middle:],
                     rehosted=self.rehosted)]

    def expected_duplicates(self) -> int:
        return self.rows if self.maybe_sent is None else int(self.maybe_sent.sum())


def quarantine(table, error: str):
    """A refused record (one row) as a plain text record under the same key: every field it had as
    JSON text in ``msg``, the archive's answer in ``attrs.ship_error``."""
    import pyarrow as pa

    (row,) = table.drop_columns(["ts"]).to_pylist()
    ts = table.column("ts").cast(pa.int64())[0].as_py()
    keep = {"ts", "host", "ip", "source", "source_id", "offset"}
    original = {k: v for k, v in row.items() if k not in keep and v is not None}
    stand_in = {name: row[name] for name in keep if name != "ts"}
    stand_in.update(level="UNKNOWN", format="text", msg=json.dumps(original, ensure_ascii=False, default=str),
                    attrs=json.dumps({"ship_error": error[:500]}, ensure_ascii=False))
    columns = {f.name: pa.array([stand_in.get(f.name)], f.type) for f in table.schema if f.name != "ts"}
    columns["ts"] = pa.array([ts], pa.int64()).cast(table.schema.field("ts").type)
    return pa.table({f.name: columns[f.name] for f in table.schema}, schema=table.schema)


@dataclass
class Request:
    preferred: int
    chunks: list[Chunk] = field(default_factory=list)
    nbytes: int = 0
    rows: int = 0
    started: float = field(default_factory=time.monotonic)
    notices: list = field(default_factory=list)  # identity notices (ranklog.source_identity.Group)


_EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"


def encode(batches: list, schema, compression: str = "lz4") -> bytes:
    """One Arrow IPC stream with compressed buffers (lz4 or zstd; see AgentConfig.compression)."""
    import pyarrow as pa

    sink = io.BytesIO()
    # one thread: the agent's parallelism is its parse workers and senders; pyarrow's pool handing
    # ~20 small column buffers to other threads cost more than it saved, and more on a loaded node
    options = pa.ipc.IpcWriteOptions(compression=compression, use_threads=False)
    with pa.ipc.new_stream(sink, schema, options=options) as writer:
        for batch in batches:
            writer.write_batch(batch if batch.schema.equals(schema) else batch.cast(schema))
    return sink.getvalue()


def encode_message(batch, schema, compression: str = "lz4") -> bytes:
    """One record batch as an encapsulated Arrow IPC message (compressed buffers, no schema), so that a
    parse worker can encode its chunk and a sender only joins messages (:func:`assemble`)."""
    import pyarrow as pa

    reader = pa.ipc.MessageReader.open_stream(pa.py_buffer(encode([batch], schema, compression)))
    reader.read_next_message()  # the schema
    return reader.read_next_message().serialize().to_pybytes()


def joined(batches: list, schema):
    """`batches` as one record batch of `schema`."""
    import pyarrow as pa

    batches = [batch if batch.schema.equals(schema) else batch.cast(schema) for batch in batches]
    return batches[0] if len(batches) == 1 else pa.concat_batches(batches)


def assemble(schema, messages: list[bytes]) -> bytes:
    """An IPC stream of `schema` (its metadata included) and record batch messages: the bytes
    :func:`encode` writes for the same batches."""
    return b"".join([schema.serialize().to_pybytes(), *messages, _EOS])


def http_client(cfg, timeout: float, connections: int):
    """An httpx client for the archive, verifying its certificate as the agent's config says."""
    import httpx

    verify: object = cfg.tls_verify
    if cfg.tls_verify and cfg.tls_ca:
        verify = ssl.create_default_context(cafile=cfg.tls_ca)
    return httpx.Client(timeout=timeout, verify=verify, limits=httpx.Limits(max_connections=connections))


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
        self._burst_until = 0.0  # a full request was cut within the last batch_latency (see tick)
        self._last_cut = float("-inf")  # when the last request went (see tick)

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
            self._burst_until = time.monotonic() + self._cfg.batch_latency

    def tick(self, force: bool = False, caught_up: bool = False) -> None:
        """Cut requests whose oldest chunk has waited `batch_latency` (all of them when `force`).

        Once the reader has `caught_up` (a read round found nothing new) more data is not coming soon,
        and a request waits only so that a trickle cannot send more than one request per
        `batch_latency`. It goes at once when no request went in the last `batch_latency` (a lone
        record — the last lines before a crash — ships without delay), when a request was cut full
        within it (the tail of a burst; at most one such cut per full one), or when it holds a
        quarter of `batch_bytes` (requests stay bounded by the data rate over a quarter request).
        """
        now = time.monotonic()
        latency = self._cfg.batch_latency
        early = caught_up and (now < self._burst_until or now - self._last_cut >= latency)
        for index in list(self._open):
            request = self._open[index]
            if (force or early or now - request.started >= latency
                    or (caught_up and request.nbytes * 4 >= self._cfg.batch_bytes)):
                self._send(self._open.pop(index))
                if early:
                    self._burst_until = 0.0

    def notify(self, notices: list) -> None:
        """Send identity notices (:mod:`.node_identity`) to the archive, in a request of their own."""
        self._send(Request(self.endpoints.preferred(notices[0].source_id), notices=list(notices)))

    def _send(self, request: Request) -> None:
        if request.rows == 0 and not request.notices:
            # Nothing to store (blank lines, a record still pending): acknowledged without a round trip.
            self._on_ack(request.chunks)
            return
        self._last_cut = time.monotonic()
        self._queue.put(request)

    @property
    def depth(self) -> int:
        """Requests waiting for a sender thread."""
        return self._queue.qsize()

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
        return http_client(self._cfg, self._cfg.request_timeout, len(self.endpoints.items) * 2)

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

    def _first_part(self, request: Request) -> Part:
        """The request as one part: the chunks' batch messages, a parse worker's as it encoded it, and
        each run of chunks parsed in the reading thread as one (a trickle's request holds many chunks
        of a few rows, and a message's encoding costs ~50 µs whatever its size)."""
        import numpy as np

        messages: list[bytes] = []
        run: list = []
        for chunk in (c for c in request.chunks if c.rows):
            if chunk.encoded is None:
                run.append(chunk.batch)
                continue
            if run:
                messages.append(encode_message(joined(run, self._schema), self._schema, self._cfg.compression))
                run = []
            messages.append(chunk.encoded)
        if run:
            messages.append(encode_message(joined(run, self._schema), self._schema, self._cfg.compression))
        spans = [(c.key, c.start, c.end) for c in request.chunks if c.rows and c.end > c.start]
        sent = np.concatenate([np.zeros(0, bool), *(np.full(c.rows, c.maybe_sent) for c in request.chunks if c.rows)])
        return Part(messages=messages, nrows=request.rows, spans=spans, maybe_sent=sent,
                    notices=notices_json(request.notices) if request.notices else None)

    def _deliver(self, client, request: Request) -> bool:
        """Send until every record is acknowledged (or, refused for good, accounted); False only when
        the agent is stopping.

        The request starts as one body. A 413 halves the part that got it. A permanent refusal
        (400/422: the archive says this body cannot be stored, a retry cannot change that) bisects
        the part until the refused record is alone; that record is sent again as a plain text record
        under the same key with the refusal in ``attrs.ship_error`` (:func:`quarantine`), and if even
        that is refused it is counted lost (``ranklog_agent_lost_records_total{reason="refused"}``),
        logged with its key and alerted on. Either way the rest ships and the checkpoint moves on.
        """
        parts: list[Part] = [self._first_part(request)]
        while parts and not self._stop.is_set():
            index, wait = self.endpoints.choose(request.preferred)
            if index is None:
                self._stop.wait(min(wait, 1.0))
                continue
            part = parts[0]
            status, detail = self._post(client, index, part.body(self._schema, self._cfg.compression))
            if status is not None and 200 <= status < 300:
                self.endpoints.succeeded(index)
                self._check_duplicates(part, detail, index)
                parts.pop(0)
            elif status is None or status >= 500:  # it may have been stored before the failure
                part.maybe_sent = None
            elif status == 403 and refused_hosts(detail) is not None:
                parts[0:1] = self._rehosted(part.decoded(self._schema, self._cfg.compression),
                                            refused_hosts(detail) or [], index)
            elif part.rows == 0 and (status == 413 or status in PERMANENT_STATUSES):  # notices only
                self.endpoints.succeeded(index)
                log.error("archive %s refused %d identity notice(s) (HTTP %s: %s); the records keep what they "
                          "carried", self.endpoints.items[index].url, len(request.notices), status, detail[:300])
                parts.pop(0)
            elif (status == 413 or status in PERMANENT_STATUSES) and part.rows > 1:
                parts[0:1] = part.decoded(self._schema, self._cfg.compression).halves()
                log.warning("archive %s refused %d record(s) (HTTP %s); splitting them to isolate the cause",
                            self.endpoints.items[index].url, part.rows, status)
            elif status == 413 or status in PERMANENT_STATUSES:
                self.endpoints.succeeded(index)  # the archive answered; the record is the problem
                parts[0:1] = self._refused(part.decoded(self._schema, self._cfg.compression), status, detail)
        if parts:
            return False
        self._metrics.agent_records_shipped.inc(request.rows)
        self._metrics.agent_ship_seconds.observe(time.monotonic() - request.started)
        return True

    def _check_duplicates(self, part: Part, answer: str, index: int) -> None:
        """Duplicates beyond what this agent may have sent before: the archive claims to hold records
        this node never sent (see :mod:`.answers`); they were not stored."""
        unexpected = duplicates_in(answer) - part.expected_duplicates()
        if unexpected > 0:
            self._metrics.agent_unexpected_duplicates.inc(unexpected)
            table = part.decoded(self._schema, self._cfg.compression).table
            sources = sorted(set(table.column("source_id").to_pylist()))
            log.warning("archive %s answered %d record(s) as duplicates that this agent never sent before "
                        "(source %s): another client holds data under this node's keys (a shared token? a "
                        "forged source_id?) and these records were NOT stored; counted in "
                        "ranklog_agent_unexpected_duplicates_total", self.endpoints.items[index].url, unexpected,
                        ", ".join(sources[:5]) + (f" and {len(sources) - 5} more" if len(sources) > 5 else ""))

    def _rehosted(self, part: Part, hosts: list[str], index: int) -> list[Part]:
        """A 403 host_not_allowed: the part again under this node's host (once); a token that may not
        even write this node's own host is a configuration error, retried like any refused token."""
        own = self._cfg.host
        if part.rehosted or own in hosts:
            log.error("archive %s refuses records of host %s with our token: the token file's binding does not "
                      "allow this node's own name (--host %s); fix the archive's tokens file",
                      self.endpoints.items[index].url, ", ".join(hosts[:5]), own)
            self.endpoints.refused_token(index)
            return [part]
        log.warning("archive %s refused records naming host(s) %s (this node's token may write only its own); "
                    "sending them as host %s with the line's host in attrs.line_host",
                    self.endpoints.items[index].url, ", ".join(hosts[:5]), own)
        return [Part(rehost(part.table, hosts, own), part.quarantined, part.spans, part.maybe_sent, rehosted=True)]

    def _refused(self, part: Part, status: int, detail: str) -> list[Part]:
        """A single record refused for good: its text stand-in to send, or nothing once that was refused too."""
        row = part.table.drop_columns(["ts"]).to_pylist()[0]
        key = f"{row.get('source')} (source_id {row.get('source_id')}) offset {row.get('offset')}"
        if not part.quarantined:
            log.error("archive refused the record at %s (HTTP %s: %s); sending it again as a text record "
                      "with the error in attrs.ship_error", key, status, detail[:300])
            self._metrics.agent_quarantined_records.inc()
            return [Part(quarantine(part.table, f"HTTP {status}: {detail}"), quarantined=True,
                         maybe_sent=part.maybe_sent, rehosted=part.rehosted)]
        log.error("archive refused even the text stand-in of the record at %s (HTTP %s: %s); it is LOST, "
                  "counted in ranklog_agent_lost_records_total{reason=\"refused\"}", key, status, detail[:300])
        self._metrics.agent_lost_records.labels(reason="refused").inc()
        return []

    def _post(self, client, index: int, body: bytes) -> tuple[int | None, str]:
        """POST one body; failures are counted and back the endpoint off. (status or None, answer text)."""
        import httpx

        endpoint = self.endpoints.items[index]
        try:
            token = self._cfg.token()
        except ValueError as exc:
            self._fail(index, "token", None, str(exc))
            return None, ""
        try:
            response = client.post(f"{endpoint.url}/v1/ingest", content=body,
                                   headers={"Content-Type": CONTENT_TYPE, "Authorization": f"Bearer {token}"})
        except httpx.TimeoutException as exc:
            self._fail(index, "timeout", None, repr(exc))
            return None, ""
        except httpx.HTTPError as exc:
            tls = isinstance(exc.__context__, ssl.SSLError) or "CERTIFICATE_VERIFY_FAILED" in str(exc)
            self._fail(index, "tls" if tls else "connect", None, repr(exc))
            return None, ""
        status = response.status_code
        detail = response.text
        if 200 <= status < 300:
            return status, detail
        if status == 403 and refused_hosts(detail) is not None:
            self._metrics.agent_ship_failures.labels(reason="host_not_allowed").inc()
            return status, detail
        if status in (401, 403):
            self._metrics.agent_ship_failures.labels(reason="unauthorized").inc()
            self.endpoints.refused_token(index)
            return status, detail
        if status == 413:
            self._metrics.agent_ship_failures.labels(reason="too_large").inc()
            return status, detail
        if status in PERMANENT_STATUSES:
            self._metrics.agent_ship_failures.labels(reason="rejected").inc()
            return status, detail
        retry_after = parse_retry_after(response.headers.get("Retry-After")) if status in _RETRYABLE_STATUS_REASON else None
        reason = _RETRYABLE_STATUS_REASON.get(status, "http_5xx" if status >= 500 else "rejected")
        self._fail(index, reason, retry_after, f"HTTP {status}: {detail[:200]}")
        return status, detail

    def _fail(self, index: int, reason: str, retry_after: float | None, detail: str) -> None:
        self._metrics.agent_ship_failures.labels(reason=reason).inc()
        delay = self.endpoints.failed(index, retry_after)
        level = logging.ERROR if reason in ("rejected", "token", "tls") else logging.WARNING
        log.log(level, "shipping to %s failed (%s: %s); retrying in %.2fs, nothing is dropped",
                self.endpoints.items[index].url, reason, detail, delay)
