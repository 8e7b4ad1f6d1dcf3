"""Header limits on the archive's listener: a slow or huge request head cannot hold a connection.

uvicorn's httptools protocol (the fast parser the archive runs on) has neither a header read
timeout nor a header size limit: ``timeout_keep_alive`` only closes connections idle *between*
requests and every received byte cancels it, so a client that trickles its head a byte at a time
(slowloris) keeps its connection, and llhttp buffers a head of any size. h11 has a size limit
(``h11_max_incomplete_event_size``, answered 400) but no timeout either, and is slower. So the
guard sits here, in a small subclass of uvicorn's own protocol:

- a request head (request line + headers) must be complete within ``header_timeout`` of the
  connection opening or of its first byte (for the next request on a kept-alive connection);
  otherwise 408 with ``Connection: close`` if any byte of it came, else the silent connection is
  closed;
- a head larger than ``max_header_size`` (request target + header names and values; or, while it
  is still incomplete, the bytes received since it began) gets 431 and the connection closed.

Both are counted in ``ranklog_archive_rejected_requests_total`` (reasons ``header_timeout`` and
``header_too_large``), which the ``RanklogArchiveRejectingIngest`` alert watches. Bodies are the
app's business (``body_timeout``, ``max_body_size``). Under TLS the handshake comes first and is
bounded by asyncio's own 60 s handshake timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a header deadline and a header size limit (see the module).

    Cheap per request (the archive's agents send many small ones): a request only stamps its head's
    deadline; one timer per connection checks it, re-armed only when it fires early or is not pending.
    """

    header_timeout: float = 10.0
    max_header_size: int = 64 * 1024
    count: Callable[[str], None] = staticmethod(lambda reason: None)  # one refusal, by reason

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_deadline: float | None = None  # loop time by which the head in progress must be complete
        self._head_begun = False  # llhttp saw the first byte of the request (a 408 is then due, not a silent close)
        self._head_received = 0  # bytes received while the head was incomplete (bounds a head still arriving)
        self._refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_deadline = self.loop.time() + self.header_timeout
        self._arm_head_timer(self.header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._head_deadline is not None:
            self._head_received += len(data)
        super().data_received(data)
        if (self._head_deadline is not None and self._head_received > self.max_header_size and not self._refused
                and not self.transport.is_closing()):
            self._refuse(431, "header_too_large", f"request head exceeds max_header_size ({self.max_header_size} bytes)")

    # Parser callbacks
    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._head_deadline is None:  # the next request on a kept-alive (or pipelined) connection
            self._head_deadline, self._head_received = self.loop.time() + self.header_timeout, 0
            if self._head_timer is None:
                self._arm_head_timer(self.header_timeout)
        self._head_begun = True

    def on_headers_complete(self) -> None:
        self._head_deadline, self._head_begun = None, False
        if self._refused:
            return
        # The complete head as parsed: target + header lines (uvicorn keeps them in self.url / self.headers).
        size = len(self.url) + sum(len(name) + len(value) for name, value in self.headers) + 4 * len(self.headers)
        if size > self.max_header_size:
            # Answered and closed now; llhttp finishes the chunk at hand (the callbacks below ignore it), and
            # data_received drops anything after.
            self._refuse(431, "header_too_large", f"request head exceeds max_header_size ({self.max_header_size} bytes)")
            return
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self._refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if not self._refused:
            super().on_message_complete()

    # The guard
    def _arm_head_timer(self, delay: float) -> None:
        self._head_timer = self.loop.call_later(delay, self._check_head)

    def _check_head(self) -> None:
        self._head_timer = None
        if self._refused or self._head_deadline is None or self.transport.is_closing():
            return  # no head in progress: the next one arms the timer again
        remaining = self._head_deadline - self.loop.time()
        if remaining > 0:  # a later head than the one this timer was armed for
            self._arm_head_timer(remaining)
            return
        message = f"request head not received within {self.header_timeout:g}s"
        # A connection that never sent a byte gets no answer (nothing to answer).
        self._refuse(408 if self._head_begun else None, "header_timeout", message)

    def _refuse(self, status: int | None, reason: str, message: str) -> None:
        """Answer `status` (None: no answer) with `Connection: close`, close, and count it."""
        self._refused = True
        self._unset_keepalive_if_required()
        if status is not None:
            body = message.encode()
            self.transport.write(b"".join([
                STATUS_LINE[status], b"content-type: text/plain; charset=utf-8\r\n",
                b"content-length: ", str(len(body)).encode(), b"\r\nconnection: close\r\n\r\n", body]))
        self.transport.close()
        self.count(reason)


def guarded_protocol(header_timeout: float, max_header_size: int,
                     count: Callable[[str], None]) -> type[GuardedHttpToolsProtocol]:
    """The protocol class for ``uvicorn.Config(http=…)``, bound to these limits and this refusal counter."""
    return type("ArchiveHttpProtocol", (GuardedHttpToolsProtocol,), {
        "header_timeout": header_timeout, "max_header_size": max_header_size, "count": staticmethod(count)})
