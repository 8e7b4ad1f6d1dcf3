"""Failures that stick end the archive (issue 40 item 9), so systemd (Restart=always) starts it again.

The WAL directory is made immutable (``chattr +i``; where the filesystem or the capabilities refuse it,
directories are put where the next segments would be created, which fails the same ``open``) while
the archive runs with tiny segments, so every append needs a new segment. A short fault answers 503
with ``Retry-After`` and heals by itself; one that lasts past ``wal_retry_for`` makes ``/readyz`` say
why, and the process exits non-zero. Started again on a healthy directory, every acknowledged record
is there.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pyarrow.compute as pc
import pytest

from tests.helpers.archive_proc import NDJSON, known_flags, read_archive, running_archive
from tests.reliability.report import Row

pytestmark = pytest.mark.slow
RETRY_FOR, EXIT_DELAY = 3.0, 2.0


class _Fault:
    """Makes creating files in a directory fail: ``chattr +i`` where possible, else obstructions."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        probe = directory.parent / ".chattr-probe"
        probe.mkdir()
        self.chattr = subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode == 0
        if self.chattr:
            subprocess.run(["chattr", "-i", str(probe)], check=True)
        probe.rmdir()
        self._made: list[Path] = []

    @property
    def how(self) -> str:
        return "chattr +i on the WAL directory" if self.chattr else "directories where the next segments go"

    def on(self) -> None:
        if self.chattr:
            subprocess.run(["chattr", "+i", str(self.directory)], check=True)
            return
        newest = max(int(p.name.split(".")[0]) for p in self.directory.glob("*.wal"))
        for seq in range(newest, newest + 2000):
            path = self.directory / f"{seq:020d}.wal"
            if not path.exists():
                path.mkdir()
                self._made.append(path)

    def off(self) -> None:
        if self.chattr:
            subprocess.run(["chattr", "-i", str(self.directory)], check=True)
        for path in self._made:
            with contextlib.suppress(OSError):
                path.rmdir()
        self._made.clear()


def _body(request: int) -> bytes:
    return "\n".join(json.dumps({"msg": f"request {request} line {i}", "source_id": "f.log",
                                 "offset": request * 1000 + i}) for i in range(10)).encode()


def test_a_wal_that_cannot_rotate_ends_the_process_after_readyz_said_why(tmp_path, token_file, record_row):
    root = tmp_path / "archive"
    wal = root / "_ranklog" / "f1" / "wal"
    acked: set[int] = set()
    statuses: dict[int, int] = {}
    with running_archive(root, token_file, extra_args=(
            "--archive-id", "f1", "--wal-segment-size", "512", "--flush-interval", "200ms",
            *known_flags("--wal-retry-for", f"{RETRY_FOR:g}s", "--fatal-exit-delay", f"{EXIT_DELAY:g}s"))) as archive:
        fault = _Fault(wal)
        with httpx.Client(timeout=10, headers=archive.headers(NDJSON)) as client:
            def post(request: int) -> httpx.Response:
                try:
                    answer = client.post(f"{archive.url}/v1/ingest", content=_body(request))
                except httpx.HTTPError as exc:  # no answer at all: recorded as status 0
                    answer = httpx.Response(0, text=str(exc))
                statuses[answer.status_code] = statuses.get(answer.status_code, 0) + 1
                if answer.status_code == 200:
                    acked.add(request)
                return answer

            for request in range(5):
                assert post(request).status_code == 200
            try:
                fault.on()  # a short fault: 503, then healed
                short = post(5)
            finally:
                fault.off()
            healed = post(6)
            fault.on()  # a fault that sticks
            try:
                refusals, readyz, started = [], None, time.monotonic()
                request = 7
                while archive.proc.poll() is None and time.monotonic() - started < RETRY_FOR + EXIT_DELAY + 20:
                    refusals.append(post(request).status_code)
                    with contextlib.suppress(httpx.HTTPError):
                        answer = client.get(f"{archive.url}/readyz")
                        if answer.status_code == 503 and readyz is None:
                            readyz = answer.json()
                    request += 1
                    time.sleep(0.3)
                exited_after = time.monotonic() - started
                with contextlib.suppress(subprocess.TimeoutExpired):
                    archive.proc.wait(5)
                code = archive.proc.returncode  # None: still running, the failure never ended it
            finally:
                fault.off()
            archive.stop(signal.SIGKILL)
            log = archive.log_text()
            archive.extra_args = ("--archive-id", "f1", "--flush-interval", "200ms")
            archive.start()
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                stored = read_archive(root)
                stored = stored.filter(pc.equal(stored["source_id"], "f.log"))
                if stored.num_rows >= 10 * len(acked):
                    break
                time.sleep(0.2)
    requests = {offset // 1000 for offset in stored["offset"].to_pylist()}
    record_row(Row(
        "WAL cannot rotate", f"archive with 512-byte WAL segments (a new one per request); {fault.how} for one "
        f"request (short fault), then for good (wal_retry_for {RETRY_FOR:g} s, fatal_exit_delay {EXIT_DELAY:g} s); "
        "then restarted on a healthy directory",
        "short fault: 503 with Retry-After, healed without a restart; lasting fault: /readyz 503 naming it, process "
        "exits non-zero; every acknowledged record archived after the restart",
        written=10 * len(acked), archived=stored.num_rows, lost=10 * len(acked - requests),
        duplicated=stored.num_rows - len(set(stored["offset"].to_pylist())),
        notes=f"short fault answered {short.status_code} (Retry-After {short.headers.get('retry-after')}), next "
              f"request {healed.status_code}; lasting fault: answers {sorted(set(refusals))}, /readyz "
              f"{json.dumps(readyz)[:160] if readyz else None}, exit code {code} {exited_after:.1f} s after it began; "
              f"answers overall {statuses} (0: no answer, the process was stopping)"))
    assert short.status_code == 503 and short.headers.get("retry-after") and healed.status_code == 200
    assert readyz is not None and readyz["status"] == "failed" and "WAL" in readyz["error"]
    assert code not in (0, None) and exited_after < RETRY_FOR + EXIT_DELAY + 15
    assert 500 not in statuses and "exits after a failure that sticks" in log
    assert acked <= requests and stored.num_rows == len(set(stored["offset"].to_pylist()))
