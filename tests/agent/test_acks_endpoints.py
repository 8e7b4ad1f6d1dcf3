"""Acknowledgement watermarks, endpoint choice, backoff and Retry-After."""

from __future__ import annotations

import time

from ranklog.agent.acks import Watermark
from ranklog.agent.chunk import Chunk
from ranklog.agent.endpoints import Endpoints, parse_retry_after


def test_watermark_moves_only_over_contiguous_acks() -> None:
    mark = Watermark(0, {})
    chunks = [Chunk("s", i * 10, i * 10 + 10, {"n": i}) for i in range(3)]
    for chunk in chunks:
        mark.add(chunk)
    assert not mark.ack(chunks[1])  # out of order: the first is still in flight
    assert mark.offset == 0
    assert mark.ack(chunks[0])
    assert (mark.offset, mark.state) == (20, {"n": 1})
    assert mark.ack(chunks[2])
    assert (mark.offset, mark.pending) == (30, 0)


def test_preferred_endpoint_is_stable_and_spreads() -> None:
    endpoints = Endpoints(["http://a", "http://b", "http://c"], 0.1, 1.0, 60)
    picks = {endpoints.preferred(f"host:{i}") for i in range(50)}
    assert picks == {0, 1, 2}
    assert endpoints.preferred("host:7") == Endpoints(["http://x", "http://y", "http://z"], 1, 1, 1).preferred("host:7")


def test_failed_endpoint_fails_over_then_comes_back() -> None:
    endpoints = Endpoints(["http://a", "http://b"], 0.2, 1.0, 60)
    assert endpoints.choose(0) == (0, 0.0)
    delay = endpoints.failed(0)
    assert 0.1 <= delay <= 0.2
    assert endpoints.choose(0)[0] == 1  # fail-over
    endpoints.failed(1, retry_after=5.0)
    index, wait = endpoints.choose(0)
    assert index is None and 0 < wait <= 0.2
    assert endpoints.choose(0, now=time.monotonic() + 0.25)[0] == 0
    endpoints.succeeded(0)
    assert endpoints.items[0].failures == 0


def test_backoff_grows_exponentially_up_to_the_cap() -> None:
    endpoints = Endpoints(["http://a"], 0.1, 2.0, 60)
    delays = [endpoints.failed(0) for _ in range(8)]
    assert delays[0] <= 0.1 and delays[3] >= 0.4 and max(delays) <= 2.0


def test_unauthorized_endpoint_is_parked(caplog) -> None:
    endpoints = Endpoints(["http://a", "http://b"], 0.1, 1.0, 60)
    endpoints.refused_token(0)
    assert endpoints.items[0].unauthorized
    assert endpoints.choose(0)[0] == 1
    assert "refused our token" in caplog.text


def test_retry_after_forms() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    future = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 25 <= parse_retry_after(future) <= 31
