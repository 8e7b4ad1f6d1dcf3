"""Object-store faults under a live agent → archive stream, on a real S3 server (SeaweedFS).

The WAL is on local disk, so an ACK never waits for the object store: while the store is gone or
failing, ingest keeps acknowledging, the rows wait in the WAL and flushes are retried; once the
store answers again everything lands, once. Each scenario runs its own SeaweedFS (the outage row
stops it), and the archive's flush failures and ACKs during the fault are read from /metrics.
"""

from __future__ import annotations

import time

import httpx
import pytest

from tests.helpers.accounting import wait_for_archive
from tests.helpers.agent_proc import running_agent
from tests.helpers.archive_proc import running_archive
from tests.helpers.s3_data import s3_filesystem
from tests.helpers.s3_fault_proxy import fault_proxy
from tests.helpers.seaweedfs import running_seaweedfs
from tests.reliability.conftest import SOAK
from tests.reliability.report import Row
from tests.reliability.test_faults import finish_writer, start_writer

pytestmark = pytest.mark.slow


def _metric(url: str, name: str) -> float:
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


def _s3_archive(tmp_path, token_file, seaweedfs, endpoint: str | None = None):
    bucket = seaweedfs.new_bucket("fault")
    root = f"s3://{bucket}/archive"
    archive = running_archive(root, token_file, log_path=tmp_path / "archive.log", env=seaweedfs.env(endpoint),
                              extra_args=["--archive-id", "f1", "--state-dir", str(tmp_path / "archive-state"),
                                          "--flush-interval", "500ms", "--s3-request-timeout", "10s"])
    return archive, (s3_filesystem(seaweedfs), f"{bucket}/archive")


def test_object_store_unreachable_for_60_seconds(tmp_path, token_file, record_row):
    """SeaweedFS stopped for 60 s in the middle of a stream: ingest keeps ACKing into the WAL,
    the archive catches up once the store is back."""
    outage = 60.0
    seconds = outage + 20
    job, logs = "s3-outage", tmp_path / "logs"
    with running_seaweedfs(tmp_path / "seaweedfs") as seaweedfs:
        archive_cm, root = _s3_archive(tmp_path, token_file, seaweedfs)
        with archive_cm as archive, running_agent([archive.url], token_file, tmp_path / "state",
                                                  sources=[f"{logs}/**/*.jsonl*:ranklog"]):
            writer = start_writer(logs, job, "node-s3", rate=5_000, seconds=seconds)
            time.sleep(8)
            seaweedfs.stop()
            down_at = time.monotonic()
            acked_before = _metric(archive.url, "ranklog_archive_ingested_records_total")
            time.sleep(outage)
            acked_during = _metric(archive.url, "ranklog_archive_ingested_records_total") - acked_before
            wal_during = _metric(archive.url, "ranklog_archive_wal_bytes")
            failures = _metric(archive.url, "ranklog_archive_flush_failures_total")
            back_at = time.monotonic()
            seaweedfs.start()
            written = finish_writer(writer)
            tally, _ = wait_for_archive([root], job, written, timeout=120)
            recovery = time.monotonic() - back_at
    record_row(Row("object store unreachable 60 s", f"archive on s3:// (SeaweedFS), agent shipping a {seconds:.0f} s "
                   f"stream at 5,000 lines/s; SeaweedFS stopped (SIGTERM) 8 s in, left down {back_at - down_at:.0f} s, then started",
                   "writer seq vs the bucket's rows (pyarrow over S3)", tally.written, tally.archived, tally.lost,
                   tally.duplicated, recovery,
                   f"{acked_during:,.0f} records ACKed while the store was down (WAL {wal_during / 1e6:.1f} MB "
                   f"unflushed at the end of the outage, {failures:.0f} flush attempts failed and were retried); "
                   "recovery = restart of the store begins → all in the bucket"))
    assert acked_during > 0, "ingest stopped ACKing while the object store was down"
    assert failures > 0
    assert tally.lost == 0 and tally.duplicated == 0, tally


def test_object_store_answering_5xx_and_slow(tmp_path, token_file, record_row):
    """A proxy in front of SeaweedFS answers half the requests with 503 SlowDown, then delays every
    answer past normal, then heals; nothing is lost or doubled."""
    phase = 30.0 if SOAK else 12.0
    seconds = 3 * phase + 5
    job, logs = "s3-5xx-slow", tmp_path / "logs"
    with running_seaweedfs(tmp_path / "seaweedfs") as seaweedfs, fault_proxy(seaweedfs.endpoint) as proxy:
        archive_cm, root = _s3_archive(tmp_path, token_file, seaweedfs, proxy.endpoint)
        with archive_cm as archive, running_agent([archive.url], token_file, tmp_path / "state",
                                                  sources=[f"{logs}/**/*.jsonl*:ranklog"]):
            writer = start_writer(logs, job, "node-s3", rate=5_000, seconds=seconds)
            time.sleep(3)
            acked_before = _metric(archive.url, "ranklog_archive_ingested_records_total")
            proxy.error_rate = 0.5
            time.sleep(phase)
            proxy.error_rate, proxy.delay = 0.0, 4.0
            time.sleep(phase)
            proxy.delay = 0.0
            healed = time.monotonic()
            acked_during = _metric(archive.url, "ranklog_archive_ingested_records_total") - acked_before
            failures = _metric(archive.url, "ranklog_archive_flush_failures_total")
            written = finish_writer(writer)
            tally, _ = wait_for_archive([root], job, written, timeout=120)
            recovery = time.monotonic() - healed
    record_row(Row("object store 5xx / slow", f"archive on s3:// through a fault proxy: {phase:.0f} s of 503 SlowDown "
                   f"to half the requests, {phase:.0f} s of every answer delayed 4 s, then healthy; agent stream at "
                   "5,000 lines/s throughout", "writer seq vs the bucket's rows (pyarrow over S3)",
                   tally.written, tally.archived, tally.lost, tally.duplicated, recovery,
                   f"proxy: {proxy.counts['failed']:,} requests answered 503, {proxy.counts['delayed']:,} delayed; "
                   f"{acked_during:,.0f} records ACKed during the faults; {failures:.0f} flush attempts failed and "
                   "were retried; recovery = healed → all in the bucket"))
    assert proxy.counts["failed"] > 0 and proxy.counts["delayed"] > 0
    assert acked_during > 0
    assert tally.lost == 0 and tally.duplicated == 0, tally
