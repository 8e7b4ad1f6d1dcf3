"""The archive on a real object store: SeaweedFS's S3 gateway, an ``s3://bucket/prefix`` root.

The WAL stays on local disk (an ACK means fsynced there); Parquet objects land in the bucket whole.
Endpoint and credentials come only from the standard AWS variables, as a deployment gives them.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tests.helpers.archive_proc import ArchiveHandle, running_archive
from tests.helpers.procs import ranklog_cmd
from tests.helpers.s3_data import wait_s3_rows
from tests.helpers.seaweedfs import SeaweedFS

from .util import by_key, post_table

pytestmark = pytest.mark.slow


def _keys(table: pa.Table) -> pa.Array:
    return pc.binary_join_element_wise(table["source_id"], pc.cast(table["offset"], pa.string()), "@")


def _start(root: str, state: Path, token_file: Path, seaweedfs: SeaweedFS, *flags: str,
           archive_id: str = "s1", endpoint: str | None = None):
    return running_archive(root, token_file, log_path=state.parent / f"{archive_id}.log",
                           env=seaweedfs.env(endpoint),
                           extra_args=["--archive-id", archive_id, "--state-dir", str(state), *flags])


def test_acked_records_reach_the_bucket_once_across_kill_9(tmp_path, token_file, seaweedfs, s3_root, small_corpus):
    with _start(s3_root, tmp_path / "state", token_file, seaweedfs, "--flush-interval", "200ms") as archive:
        half = by_key(small_corpus).slice(0, 2000)
        assert post_table(archive, half)["accepted"] == 2000
        archive.stop(signal.SIGKILL)  # ACKed: in the local WAL, maybe not yet in the bucket
        assert not list((tmp_path / "state").glob("*.parquet")), "Parquet never goes to the state dir"
        archive.start()
        assert post_table(archive, small_corpus) == {"accepted": 2000, "duplicates": 2000}
        stored = wait_s3_rows(seaweedfs, s3_root, 4000)
    assert len(pc.unique(_keys(stored))) == stored.num_rows == 4000
    assert by_key(stored.select(small_corpus.column_names)).equals(by_key(small_corpus))
    bucket = s3_root.split("/")[2]
    names = seaweedfs.keys(bucket, "archive/")
    assert names and all(name.startswith("archive/date=") and "/hour=" in name for name in names
                         if name.endswith(".parquet")), names
    assert not [name for name in names if name.endswith(".tmp")], "a temporary object stayed visible"


def _run(seaweedfs: SeaweedFS, *args: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(ranklog_cmd(*args), capture_output=True, text=True, timeout=120,
                          env={**os.environ, **seaweedfs.env()})


def test_query_triage_integrity_stats_report_read_the_bucket(tmp_path, token_file, seaweedfs, s3_root,
                                                           small_corpus):
    with _start(s3_root, tmp_path / "state", token_file, seaweedfs, "--flush-interval", "200ms") as archive:
        post_table(archive, small_corpus)
        wait_s3_rows(seaweedfs, s3_root, small_corpus.num_rows)
        answers = _check_readers(seaweedfs, s3_root, small_corpus, tmp_path)
        answers.append(httpx.get(f"{archive.url}/metrics", timeout=10).text)
        remote = httpx.get(f"{archive.url}/v1/query", params={"count": "true"}, headers=archive.headers(),
                           timeout=60)
        assert remote.json() == {"count": small_corpus.num_rows}
        answers += [remote.text, archive.log_text()]
    # The secret is in none of what the archive and the commands print, log or answer.
    for text in answers:
        assert seaweedfs.secret_key not in text


def _check_readers(seaweedfs: SeaweedFS, root: str, corpus: pa.Table, tmp_path: Path) -> list[str]:
    errors = int(pc.sum(pc.is_in(corpus["level"], pa.array(["ERROR", "CRITICAL"]))).as_py())
    count = _run(seaweedfs, "query", "--archive", root, "--count")
    assert count.returncode == 0, count.stderr
    assert int(count.stdout.split()[0]) == corpus.num_rows
    severe = _run(seaweedfs, "query", "--archive", root, "--level", "ERROR", "--count")
    assert int(severe.stdout.split()[0]) == errors, severe.stderr
    # The severe-rows and trace indexes are built on first use and stored as objects in the bucket.
    pattern = "Error"
    matched = pc.or_(pc.match_substring_regex(corpus["msg"], pattern),
                     pc.match_substring_regex(pc.fill_null(corpus["exc"], ""), pattern))
    searched = _run(seaweedfs, "query", "--archive", root, "--regex", pattern, "--count")
    assert int(searched.stdout.split()[0]) == pc.sum(matched).as_py(), searched.stderr
    trace = pc.drop_null(corpus["trace_id"])[0].as_py()
    traced = _run(seaweedfs, "query", "--archive", root, "--trace-id", trace, "--count")
    assert int(traced.stdout.split()[0]) == pc.sum(pc.equal(corpus["trace_id"], trace)).as_py(), traced.stderr
    bucket = root.split("/")[2]
    indexes = [key for key in seaweedfs.keys(bucket, "archive/_ranklog_index/")]
    assert any("/trace/" in key for key in indexes) and any("/severe/" in key for key in indexes), indexes
    again = _run(seaweedfs, "query", "--archive", root, "--regex", pattern, "--count")
    assert again.stdout == searched.stdout
    integrity = _run(seaweedfs, "integrity", "--archive", root)
    stats = _run(seaweedfs, "stats", "--archive", root)
    triage = _run(seaweedfs, "triage", "--archive", root)
    report_path = tmp_path / "report.html"
    report = _run(seaweedfs, "report", "--archive", root, "-o", str(report_path))
    assert stats.returncode == 0 and triage.returncode in (0, 1) and report.returncode == triage.returncode, (
        stats.stderr, triage.stderr, report.stderr)
    assert report_path.stat().st_size > 10_000
    return [count.stdout + count.stderr, severe.stdout + severe.stderr, searched.stderr, traced.stderr, integrity.stdout + integrity.stderr,
            stats.stdout + stats.stderr, triage.stdout + triage.stderr, report.stderr, report_path.read_text()]


def test_bad_credentials_fail_with_one_clear_line(seaweedfs, s3_root, tmp_path):
    import os

    env = {**os.environ, **seaweedfs.env(), "AWS_SECRET_ACCESS_KEY": "wrong-secret-5f2c"}
    answer = subprocess.run(ranklog_cmd("query", "--archive", s3_root, "--count"), capture_output=True, text=True,
                            timeout=120, env=env)
    assert answer.returncode != 0
    assert "Traceback" not in answer.stderr and "wrong-secret-5f2c" not in answer.stderr
    assert s3_root in answer.stderr


def test_archive_refuses_an_s3_root_without_a_local_state_dir(token_file, seaweedfs, s3_root, tmp_path):
    handle = ArchiveHandle(root=s3_root, token_file=token_file, port=1, env=seaweedfs.env(),
                           log_path=tmp_path / "a.log")
    with pytest.raises(RuntimeError):
        handle.start(timeout=30)
    assert "state_dir" in handle.log_text()
