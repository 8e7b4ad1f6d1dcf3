"""Exactly-once over real processes: re-sends, overlaps, out-of-order, restarts, kill -9, torn WAL."""

from __future__ import annotations

import random
import signal
import threading
import time

import httpx
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tests.helpers.archive_proc import arrow_body, read_archive

from .util import by_key, post, post_table, wait_rows


def _assert_exactly(stored: pa.Table, expected: pa.Table) -> None:
    keys = pc.binary_join_element_wise(stored["source_id"], pc.cast(stored["offset"], pa.string()), "@")
    assert len(pc.unique(keys)) == stored.num_rows, "a record is stored twice"
    assert by_key(stored).equals(by_key(expected))


def test_resends_overlaps_and_out_of_order(start_archive, small_corpus):
    archive = start_archive("--flush-interval", "200ms")
    ordered = by_key(small_corpus)
    first, second, third = ordered.slice(0, 1500), ordered.slice(1500, 1500), ordered.slice(3000)
    assert post_table(archive, third) == {"accepted": 1000, "duplicates": 0}  # out of order: later offsets first
    assert post_table(archive, first) == {"accepted": 1500, "duplicates": 0}
    assert post_table(archive, first) == {"accepted": 0, "duplicates": 1500}  # lost ACK → re-send
    overlap = ordered.slice(1000, 1000)  # 500 stored + 500 new
    assert post_table(archive, overlap) == {"accepted": 500, "duplicates": 500}
    shuffled = second.take(pa.array(random.Random(3).sample(range(1500), 1500)))
    assert post_table(archive, shuffled) == {"accepted": 1000, "duplicates": 500}
    # Repeats inside one batch count once.
    doubled = pa.concat_tables([ordered.slice(0, 10), ordered.slice(0, 10)])
    assert post_table(archive, doubled) == {"accepted": 0, "duplicates": 20}
    _assert_exactly(wait_rows(archive.root, 4000), small_corpus)


@pytest.mark.slow
def test_dedup_survives_clean_and_hard_restarts(start_archive, small_corpus):
    archive = start_archive("--flush-interval", "200ms", "--snapshot-interval", "1h")
    half = by_key(small_corpus).slice(0, 2000)
    assert post_table(archive, half)["accepted"] == 2000
    archive.restart()  # SIGTERM: final flush + snapshot
    assert post_table(archive, half) == {"accepted": 0, "duplicates": 2000}
    assert post_table(archive, small_corpus)["accepted"] == 2000
    archive.stop(signal.SIGKILL)  # no snapshot since: the WAL replay must rebuild the dedup state
    archive.start()
    assert post_table(archive, small_corpus) == {"accepted": 0, "duplicates": 4000}
    _assert_exactly(wait_rows(archive.root, 4000), small_corpus)


@pytest.mark.slow
def test_kill_9_during_concurrent_ingest_keeps_every_acked_record_once(start_archive, small_corpus):
    archive = start_archive("--flush-interval", "100ms", "--snapshot-interval", "300ms")
    batches = [small_corpus.slice(i, 200) for i in range(0, small_corpus.num_rows, 200)]
    acked: list[int] = []
    lock = threading.Lock()

    def client(indices: list[int]) -> None:
        with httpx.Client(timeout=10) as http:
            for index in indices:
                try:
                    answer = http.post(f"{archive.url}/v1/ingest", content=arrow_body(batches[index]),
                                       headers=archive.headers())
                except httpx.HTTPError:
                    return  # the archive died under us
                if answer.status_code == 200:
                    with lock:
                        acked.append(index)

    threads = [threading.Thread(target=client, args=(list(range(i, len(batches), 4)),)) for i in range(4)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 20
    while len(acked) < len(batches) // 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    archive.stop(signal.SIGKILL)
    for thread in threads:
        thread.join()
    assert 0 < len(acked) < len(batches), "the kill must land mid-ingest"
    archive.start()
    expected = pa.concat_tables([batches[i] for i in sorted(acked)])
    stored = wait_rows(archive.root, expected.num_rows)
    present = pc.is_in(pc.binary_join_element_wise(expected["source_id"], pc.cast(expected["offset"], pa.string()), "@"),
                       value_set=pc.binary_join_element_wise(stored["source_id"], pc.cast(stored["offset"], pa.string()), "@"))
    assert pc.all(present).as_py(), "an ACKed record was lost"
    # The agent re-sends everything it had no ACK for (and, to be sure, everything): stored once each.
    for batch in batches:
        assert post(archive, arrow_body(batch)).status_code == 200
    _assert_exactly(wait_rows(archive.root, small_corpus.num_rows), small_corpus)


@pytest.mark.slow
def test_torn_wal_tail_is_left_alone_and_the_rest_replayed(start_archive, small_corpus):
    archive = start_archive("--flush-interval", "1h", "--snapshot-interval", "1h")
    first, second = small_corpus.slice(0, 1000), small_corpus.slice(1000, 1000)
    post_table(archive, first)
    post_table(archive, second)
    archive.stop(signal.SIGKILL)
    assert read_archive(archive.root).num_rows == 0  # everything was only in the WAL
    segment = sorted((archive.root / "_ranklog" / "t1" / "wal").glob("*.wal"))[-1]
    data = segment.read_bytes()
    second_size = len(arrow_body(second))
    torn = data[: len(data) - second_size // 2]
    segment.write_bytes(torn)  # the second entry is torn mid-body
    archive.extra_args = ("--archive-id", "t1", "--flush-interval", "200ms")
    archive.start()
    assert "an append a crash cut short" in archive.log_text()
    assert "damaged" not in archive.log_text()  # a torn tail is not damage: nothing acknowledged was in it
    assert not segment.exists() or segment.read_bytes() == torn  # never truncated in place
    _assert_exactly(wait_rows(archive.root, 1000), first)
    assert post_table(archive, second) == {"accepted": 1000, "duplicates": 0}
    assert post_table(archive, first) == {"accepted": 0, "duplicates": 1000}
    _assert_exactly(wait_rows(archive.root, 2000), small_corpus.slice(0, 2000))
