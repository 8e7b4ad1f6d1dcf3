"""Object-store faults on a real S3 server (SeaweedFS): under a live agent → archive stream, and an
archive killed mid-compaction on a bucket another archive shares.

The WAL is on local disk, so an ACK never waits for the object store: while the store is gone or
failing, ingest keeps acknowledging, the rows wait in the WAL and flushes are retried; once the
store answers again everything lands, once. Each scenario runs its own SeaweedFS (the outage row
stops it), and the archive's flush failures and ACKs during the fault are read from /metrics.
"""

from __future__ import annotations

import json
import signal
import time

import httpx
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ranklog.archive_layout import HOUR_NS, LEASE_NAME, partition_dir
from tests.archive.conftest import PAST_NS
from tests.archive.util import metric, post_table
from tests.helpers.accounting import wait_for_archive
from tests.helpers.agent_proc import running_agent
from tests.helpers.archive_proc import running_archive
from tests.helpers.corpus import generate
from tests.helpers.s3_data import (
    COMPACTING,
    QUIET,
    hour_parquet_keys,
    read_s3_archive,
    s3_filesystem,
    s3_fleet,
    wait_s3_rows,
)
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


def test_archive_killed_mid_compaction_on_s3_another_takes_over(tmp_path, token_file, seaweedfs, s3_root,
                                                               record_row):
    """Two archives on one bucket; the one compacting an hour is SIGKILLed while it holds the hour's
    lease; the other takes the lease over once it expires and finishes: every row once."""
    table = generate(40_000, start_ns=PAST_NS, span_s=3000, hosts=4, ranks_per_host=8, seed=12)
    hour = PAST_NS // HOUR_NS
    bucket, prefix = s3_root.removeprefix("s3://").split("/", 1)
    client = seaweedfs.client()
    lease_key = f"{prefix}/{partition_dir(hour)}/{LEASE_NAME}"

    def held_by_k1() -> bool:  # k1 holds the hour: it is reading, merging or committing
        try:
            body = json.loads(client.get_object(Bucket=bucket, Key=lease_key)["Body"].read())
        except client.exceptions.NoSuchKey:
            return False
        return body.get("owner") == "k1" and body.get("expires", 0) > 0

    with s3_fleet(tmp_path, token_file, seaweedfs, s3_root, ("k1", "k2"), *QUIET) as (first, second):
        for index, start in enumerate(range(0, table.num_rows, 5000)):
            post_table((first, second)[index % 2], table.slice(start, 5000))
            time.sleep(0.25)  # one flush (object) per batch
        wait_s3_rows(seaweedfs, s3_root, table.num_rows)
        files_before = len(hour_parquet_keys(seaweedfs, s3_root, hour))
        first.stop()
        second.stop()
        first.extra_args = (*first.extra_args, *COMPACTING)
        first.start()
        deadline = time.monotonic() + 60
        while not held_by_k1() and time.monotonic() < deadline:
            time.sleep(0.01)
        caught = held_by_k1()
        first.stop(signal.SIGKILL)  # dies holding the hour's lease (lease_ttl 3 s)
        second.extra_args = (*second.extra_args, *COMPACTING)
        taking_over = time.monotonic()
        second.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(hour_parquet_keys(seaweedfs, s3_root, hour)) != 1:
            time.sleep(0.3)
        recovery = time.monotonic() - taking_over
        files_after = len(hour_parquet_keys(seaweedfs, s3_root, hour))
        takeovers = metric(second, "ranklog_archive_hour_leases_total", 'outcome="takeover"')
    stored = read_s3_archive(seaweedfs, s3_root)
    keys = pc.binary_join_element_wise(stored["source_id"], pc.cast(stored["offset"], pa.string()), "@")
    expected = pc.binary_join_element_wise(table["source_id"], pc.cast(table["offset"], pa.string()), "@")
    distinct = len(pc.unique(keys))
    lost = table.num_rows - int(pc.sum(pc.is_in(expected, value_set=keys)).as_py())
    record_row(Row("archive SIGKILL mid-compaction on S3, another takes over",
                   f"2 archives on one SeaweedFS bucket, {files_before} flush objects of a closed hour "
                   f"({table.num_rows:,} records); the compacting archive SIGKILLed while holding the hour's lease "
                   "(s3.lease_ttl 3 s); the other archive, started with compaction on, takes the lease over",
                   "every (source_id, offset) posted vs the bucket's rows (pyarrow over S3)", table.num_rows,
                   stored.num_rows, lost, stored.num_rows - distinct, recovery,
                   f"{files_before} → {files_after} objects; {takeovers:.0f} lease takeover(s); "
                   "recovery = second archive started → hour compacted"))
    assert caught, "never saw k1 holding the hour"
    assert files_after == 1 and takeovers >= 1
    assert lost == 0 and stored.num_rows == distinct == table.num_rows
