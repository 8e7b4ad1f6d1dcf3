"""Many archives, one bucket: each flushes its own objects; compaction and retention of an hour are
done by whichever archive holds the hour's lease (conditional writes on SeaweedFS), and a takeover
after an owner died mid-compaction loses nothing and counts nothing twice."""

from __future__ import annotations

import json
import time

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ranklog.archive.compaction import COMPACTION_OPTIONS, read_file
from ranklog.archive.leases import HourLease, S3LeaseStore
from ranklog.archive.parquet_writer import sort_records, write_parquet
from ranklog.archive.replacement import HourOwner, _finish
from ranklog.archive.storage import Storage, compaction_temp
from ranklog.archive_layout import HOUR_NS, LEASE_NAME, partition_dir
from ranklog.object_store import S3Settings
from ranklog.query import engine
from ranklog.query.filters import QuerySpec
from ranklog.query.sources import ArchiveSource
from ranklog.record import ts_ns
from tests.helpers.corpus import generate
from tests.helpers.s3_data import COMPACTING, QUIET, hour_parquet_keys, read_s3_archive, s3_fleet, wait_s3_rows
from tests.helpers.seaweedfs import SeaweedFS

from .conftest import PAST_NS
from .util import by_key, metric, post_table

pytestmark = pytest.mark.slow


def _settings(seaweedfs: SeaweedFS) -> S3Settings:
    return S3Settings(seaweedfs.endpoint, seaweedfs.region, seaweedfs.access_key, seaweedfs.secret_key)


def _keys(table: pa.Table) -> pa.Array:
    return pc.binary_join_element_wise(table["source_id"], pc.cast(table["offset"], pa.string()), "@")


def _assert_exactly(stored: pa.Table, expected: pa.Table) -> None:
    assert len(pc.unique(_keys(stored))) == stored.num_rows, "a record is stored twice"
    assert by_key(stored.select(expected.column_names)).equals(by_key(expected))


def _count(root: str, settings: S3Settings) -> int:
    return engine.count(ArchiveSource.open(root, settings), QuerySpec())


def test_three_archives_flush_their_own_objects_and_one_compacts_each_hour(tmp_path, token_file, seaweedfs,
                                                                          s3_root):
    table = generate(9000, start_ns=PAST_NS, span_s=3 * 3600, hosts=3, ranks_per_host=4, seed=21)
    ids = ("a1", "a2", "a3")
    with s3_fleet(tmp_path, token_file, seaweedfs, s3_root, ids, *QUIET) as archives:
        for index, archive in enumerate(archives):  # each archive gets its own sources, in 3 batches
            mine = table.filter(pc.equal(table["host"], pc.unique(table["host"])[index]))
            for start in range(0, mine.num_rows, -(-mine.num_rows // 3)):
                post_table(archive, mine.slice(start, -(-mine.num_rows // 3)))
                time.sleep(0.3)  # one flush (object) per batch
        _assert_exactly(wait_s3_rows(seaweedfs, s3_root, table.num_rows), table)
    hours = sorted({int(t) // HOUR_NS for t in ts_ns(table["ts"])})
    writers = {key.rpartition("/")[2].rsplit("-", 1)[0] for hour in hours
               for key in hour_parquet_keys(seaweedfs, s3_root, hour)}
    assert writers == set(ids), "every archive flushed its own objects"
    with s3_fleet(tmp_path, token_file, seaweedfs, s3_root, ids, *COMPACTING) as archives:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and any(len(hour_parquet_keys(seaweedfs, s3_root, h)) != 1 for h in hours):
            time.sleep(0.5)
        assert [len(hour_parquet_keys(seaweedfs, s3_root, h)) for h in hours] == [1] * len(hours)
        merges = [metric(archive, "ranklog_archive_compactions_total") for archive in archives]
    assert sum(merges) >= len(hours)
    _assert_exactly(read_s3_archive(seaweedfs, s3_root), table)
    assert _count(s3_root, _settings(seaweedfs)) == table.num_rows


def test_a_commit_left_half_done_is_hidden_from_readers_and_finished_by_the_next_owner(seaweedfs, s3_root):
    """Deterministic crash point: the owner committed, made the output visible and died before
    deleting the inputs. ranklog's readers count each row once all along; another archive takes
    the expired lease and deletes the inputs, after which any hive reader does too."""
    settings = _settings(seaweedfs)
    dead = Storage(s3_root, "dead", settings)
    hour = PAST_NS // HOUR_NS
    table = generate(3000, start_ns=PAST_NS, span_s=1800, hosts=1, ranks_per_host=2, seed=4)
    inputs = []
    for part in range(3):
        path = dead.new_file_path(hour)
        write_parquet(dead, table.slice(part * 1000, 1000), path)
        inputs.append(path)
    store = S3LeaseStore(s3_root, settings)
    lease = HourLease(store, partition_dir(hour), "dead", ttl=2.0)
    assert lease.acquire()
    merged = sort_records(pa.concat_tables([read_file(dead, path) for path in inputs]))
    final = dead.new_file_path(hour)
    write_parquet(dead, merged, compaction_temp(final), **COMPACTION_OPTIONS)
    commit = {"output": final.rpartition("/")[2], "temp": compaction_temp(final).rpartition("/")[2],
              "inputs": [path.rpartition("/")[2] for path in inputs], "done": False}
    lease.write(commits=[commit])
    _finish(dead, hour, {**commit, "inputs": []})  # output visible, inputs not deleted: the owner dies here
    assert len(hour_parquet_keys(seaweedfs, s3_root, hour)) == 4
    assert read_s3_archive(seaweedfs, s3_root).num_rows == 6000  # a naive hive reader double counts now …
    assert _count(s3_root, settings) == 3000  # … ranklog's readers do not
    taker = Storage(s3_root, "taker", settings)
    owner = HourOwner(taker, store, 5.0, str(seaweedfs.workdir / "taker-state"))
    (seaweedfs.workdir / "taker-state").mkdir(exist_ok=True)
    assert not owner.run(hour, lambda lease: None), "the dead owner's lease is still live"
    time.sleep(2.2)
    assert owner.run(hour, lambda lease: None)
    assert hour_parquet_keys(seaweedfs, s3_root, hour) == [final.split("/", 1)[1]]
    _assert_exactly(read_s3_archive(seaweedfs, s3_root), table)
    body = json.loads(seaweedfs.client().get_object(Bucket=s3_root.split("/")[2],
                                                   Key=f"archive/{partition_dir(hour)}/{LEASE_NAME}")["Body"].read())
    assert body["owner"] == "taker" and body["expires"] == 0 and body["commits"][0]["done"] is True
