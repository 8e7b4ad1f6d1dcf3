"""Read endpoints' bodies are bounded in size and time; deeply nested JSON is a 400 (issue 40 item 10).

Against one archive: 64 MB of ``a&`` posted to ``/v1/query`` and to the Loki API's ``query_range``;
20,000 ``match[]`` form fields to ``/series``; a ``/v1/query`` body trickled 100 bytes every 0.3 s;
a JSON spec nested 100,000 deep; then an ordinary POST query. Each refusal must come at once (413),
at the body timeout (408, connection closed) or as a 400 — never a 5xx — and the archive's RSS must
not grow by more than 128 MiB over the whole scenario.
"""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.helpers.archive_proc import running_archive
from tests.helpers.slow_heads import trickle_body
from tests.reliability.report import Row

pytestmark = pytest.mark.slow
BODY_TIMEOUT = 3.0


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        return next(int(line.split()[1]) * 1024 for line in handle if line.startswith("VmRSS:"))


def _slow_body(port: int, token: str, path: str, seconds: float) -> tuple[str, float]:
    """Headers, then 100 bytes every 0.3 s; (status answered, seconds until the server answered or closed)."""
    started = time.monotonic()
    line = trickle_body(port, (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
                               "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n").encode(),
                        lambda: time.monotonic() - started >= seconds, piece=b" " * 100)
    return (line.split(" ")[1] if line.startswith("HTTP/") else "no answer"), time.monotonic() - started


def test_read_endpoint_bodies_are_bounded_and_nested_json_is_a_400(tmp_path, token_file, record_row):
    answers: dict[str, str] = {}
    with running_archive(tmp_path / "archive", token_file,
                         extra_args=("--body-timeout", f"{BODY_TIMEOUT:g}s")) as archive:
        pid = archive.proc.pid
        before, peak = _rss(pid), 0
        headers = {"Authorization": f"Bearer {archive.token}"}
        with httpx.Client(timeout=120, headers=headers) as client:
            def post(name: str, path: str, content: bytes, content_type: str) -> None:
                nonlocal peak
                started = time.monotonic()
                try:
                    status = str(client.post(f"{archive.url}{path}", content=content,
                                             headers={"Content-Type": content_type}).status_code)
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                answers[name] = f"{status} in {time.monotonic() - started:.1f} s"
                peak = max(peak, _rss(pid))

            big = b"a&" * (32 * 1024 * 1024)
            post("64 MB to /v1/query", "/v1/query", big, "application/json")
            post("64 MB form to query_range", "/loki/api/v1/query_range", big, "application/x-www-form-urlencoded")
            post("20,000 match[] to /series", "/loki/api/v1/series", "&".join(["match[]=%7Bjob%3D%22a%22%7D"] * 20_000)
                 .encode(), "application/x-www-form-urlencoded")
            nested = {"spec": {"levels": None}}
            deep = "[" * 100_000 + "]" * 100_000
            post("JSON nested 100,000 deep", "/v1/query",
                 json.dumps(nested).replace("null", deep).encode(), "application/json")
            post("ordinary POST query", "/v1/query", json.dumps({"spec": {}, "count": True}).encode(), "application/json")
        slow_status, slow_seconds = _slow_body(archive.port, archive.token, "/v1/query", BODY_TIMEOUT + 10)
        answers["/v1/query body trickled"] = f"{slow_status} in {slow_seconds:.1f} s"
        peak = max(peak, _rss(pid))
        alive = httpx.get(f"{archive.url}/readyz", timeout=10).status_code
    growth = (peak - before) / 1024**2
    record_row(Row(
        "read endpoint bodies", "against /v1/query and the Loki API: 64 MB of `a&` (twice), 20,000 match[] fields, "
        f"a body trickled 100 B every 0.3 s (body timeout {BODY_TIMEOUT:g} s), JSON nested 100,000 deep, then an "
        "ordinary query", "413 at once for the big ones, 408 at the timeout, 400 for the nesting, 200 for the "
        "ordinary one; never 5xx; archive RSS growth < 128 MiB",
        notes=f"{answers}; RSS {before / 1024**2:.0f} → peak {peak / 1024**2:.0f} MiB; /readyz {alive}"))
    assert answers["64 MB to /v1/query"].startswith("413") and answers["64 MB form to query_range"].startswith("413")
    assert answers["20,000 match[] to /series"].startswith("413")
    assert answers["JSON nested 100,000 deep"].startswith("400") and answers["ordinary POST query"].startswith("200")
    assert slow_status == "408" and slow_seconds < BODY_TIMEOUT + 2.5
    assert growth < 128 and alive == 200
