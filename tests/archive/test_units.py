"""In-process checks of the pieces with many cases: dedup against a model, WAL framing, config."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ranklog.archive.archive_config import ArchiveConfig
from ranklog.archive.dedup import DedupIndex
from ranklog.archive.wal import HEADER_SIZE, PREAMBLE_SIZE, Wal
from ranklog.config_loader import load_config
from ranklog.errors import ConfigError

# A batch: runs (source, first line, count, step, declared, subset seed), at most one run per source.
# A declared run holds every line of its byte span (an agent's chunk); an undeclared one any subset
# of its lines: gaps, the case that once lost records (issue 20).
_batch = st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 300), st.integers(1, 20), st.integers(1, 7),
                            st.booleans(), st.integers(0, 2**31)),
                  min_size=1, max_size=3, unique_by=lambda run: run[0])


@settings(max_examples=80, deadline=None, derandomize=True, database=None)
@given(st.lists(_batch, min_size=1, max_size=12), st.integers(0, 2**31))
def test_dedup_matches_a_set_of_keys(batches, seed):
    """Re-sends, overlaps, out-of-order, shuffled and gappy batches, declared spans or not: the kept
    rows are exactly the unseen keys; a key in a gap is never taken as stored."""
    rng = np.random.default_rng(seed)
    index, seen = DedupIndex(), set()
    steps: dict[str, int] = {}
    for batch in batches:
        keys, spans = [], {}
        for source, first, count, step, declared, subset in batch:
            step = steps.setdefault(source, step)  # one line length per source keeps offsets consistent
            run = [(source, (first // step + i) * step) for i in range(count)]
            if declared:
                spans[source] = [(run[0][1], run[-1][1] + step)]
            else:
                pick = np.random.default_rng(subset).random(count) < 0.5
                run = [key for key, take in zip(run, pick, strict=True) if take] or run[:1]
            keys += run
        rng.shuffle(keys)
        table = pa.table({"source_id": [k[0] for k in keys], "offset": pa.array([k[1] for k in keys], pa.int64())})
        keep = index.apply(table, now=0.0, spans=spans)
        expected, fresh = [], set()
        for key in keys:
            expected.append(key not in seen and key not in fresh)
            fresh.add(key)
        assert keep.tolist() == expected
        seen |= fresh
    restored = DedupIndex.restore(index.snapshot())
    every = {(src, off) for src, step in steps.items() for off in range(0, 330 * step, step)}
    probe = sorted(every)
    kept = restored.apply(pa.table({"source_id": [k[0] for k in probe], "offset": pa.array([k[1] for k in probe], pa.int64())}), now=0.0)
    assert [k for k, fresh in zip(probe, kept.tolist(), strict=True) if not fresh] == sorted(seen)


def test_a_record_in_the_gap_of_an_earlier_batch_is_stored():
    """Issue 20: offsets 0 and 1000 of a source stored, then 500 arrives: it is new, not a duplicate."""
    index = DedupIndex()
    index.apply(pa.table({"source_id": ["s", "s"], "offset": pa.array([0, 1000], pa.int64())}), now=1.0)
    assert index.apply(pa.table({"source_id": ["s"], "offset": pa.array([500], pa.int64())}), now=2.0).tolist() == [True]
    # an agent's chunk declares its span: one range, and its lines are all known
    index.apply(pa.table({"source_id": ["f"] * 3, "offset": pa.array([0, 40, 90], pa.int64())}), now=1.0,
                spans={"f": [(0, 120)]})
    index.apply(pa.table({"source_id": ["f"] * 2, "offset": pa.array([120, 160], pa.int64())}), now=1.0,
                spans={"f": [(120, 200)], "g": [(0, 10**15)]})  # g: no record of g in the body, ignored
    assert index.snapshot().filter(pa.compute.equal(index.snapshot()["source_id"], "f")).num_rows == 1
    assert "g" not in index.snapshot()["source_id"].to_pylist()


def test_staged_changes_are_undone_when_the_wal_append_fails():
    index = DedupIndex()
    index.apply(pa.table({"source_id": ["s"], "offset": pa.array([0], pa.int64())}), now=1.0)
    batch = pa.table({"source_id": ["s", "t"], "offset": pa.array([10, 0], pa.int64())})
    with pytest.raises(OSError), index.staged(batch, 2.0):
        raise OSError("disk gone")  # the WAL append
    assert index.apply(batch, now=3.0).tolist() == [True, True]  # nothing of the failed request was kept


def test_dedup_never_closes_gaps_and_forgets_idle_sources():
    index = DedupIndex()
    for start in (0, 100, 200):
        index.apply(pa.table({"source_id": ["s"] * 2, "offset": pa.array([start, start + 10], pa.int64())}), now=1.0)
    index.apply(pa.table({"source_id": ["ndjson-body:x"], "offset": pa.array([0], pa.int64())}), now=1.0)
    assert index.range_count() == 7
    index.settle(now=5000.0, settle_seconds=3600, ttl_seconds=10**6, body_ttl_seconds=100)
    assert index.range_count() == 6 and len(index) == 1  # the gaps stay open; the body key expired
    index.settle(now=2 * 10**6, settle_seconds=3600, ttl_seconds=10**6, body_ttl_seconds=100)
    assert len(index) == 0


def test_wal_replay_ignores_a_torn_tail_without_truncating_and_keeps_order(tmp_path):
    wal = Wal(str(tmp_path / "wal"), segment_size=200)
    wal.open_for_append()
    for number in range(5):
        seq = wal.append(bytes([number]) * 100, 1, 0, number)
        wal.sync_to(seq)
    wal.close()
    segments = wal.segments()
    assert len(segments) >= 2  # rotated at 200 bytes
    last = os.path.join(wal.directory, segments[-1])
    entry = Path(last).read_bytes()[-(HEADER_SIZE + 100):]
    for torn in (entry[:30], entry[:HEADER_SIZE + 40]):  # a cut header; a whole header, half the body
        with open(last, "ab") as handle:
            handle.write(torn)
        size = os.path.getsize(last)
        replayed = Wal(str(tmp_path / "wal"), segment_size=200)
        entries = list(replayed.replay())
        assert [e.seq for e in entries] == [1, 2, 3, 4, 5] and replayed.damage == []
        assert [e.body[0] for e in entries] == [0, 1, 2, 3, 4] and entries[2].received_ns == 2
        assert os.path.getsize(last) == size  # never truncated in place
        os.truncate(last, size - len(torn))
    with open(last, "ab") as handle:
        handle.write(entry[:30])
    replayed = Wal(str(tmp_path / "wal"), segment_size=200)
    list(replayed.replay())
    replayed.open_for_append()
    assert replayed.append(b"x", 2, 1, 9) == 6
    replayed.close()
    assert os.path.getsize(last) == size - HEADER_SIZE - 40 + 30  # the new entry went to a new segment
    assert [e.seq for e in Wal(str(tmp_path / "wal"), 200).replay()] == [1, 2, 3, 4, 5, 6]
    assert Wal(str(tmp_path / "wal"), 200).drop_through(3) >= 1


def test_wal_round_trips_bodies_of_any_size_written_with_writev(tmp_path):
    """Header and body go out in one writev: empty, tiny and multi-MB bodies come back byte-exact."""
    rng = np.random.default_rng(7)
    bodies = [b"", b"a", rng.bytes(5 * 1024 * 1024 + 3), rng.bytes(4096)]
    wal = Wal(str(tmp_path / "wal"), segment_size=64 * 1024 * 1024)
    wal.open_for_append()
    for number, body in enumerate(bodies):
        wal.sync_to(wal.append(body, 1, 2, number, records=number))
    wal.close()
    entries = list(Wal(str(tmp_path / "wal"), 64 * 1024 * 1024).replay())
    assert [e.body for e in entries] == bodies
    assert [(e.seq, e.content_type, e.encoding, e.received_ns, e.records) for e in entries] == [
        (n + 1, 1, 2, n, n) for n in range(len(bodies))]
    total = PREAMBLE_SIZE + sum(HEADER_SIZE + len(body) for body in bodies)
    assert sum(os.path.getsize(os.path.join(wal.directory, s)) for s in wal.segments()) == total


def test_config_fails_fast_naming_the_key(tmp_path):
    base = {"root": str(tmp_path), "token_file": "t"}
    config = load_config(ArchiveConfig, overrides={**base, "retention.levels": "debug=3d,ERROR=90d",
                                                   "max_body_size": "16MiB", "listen": "[::1]:9000"})
    assert config.retention.keep_for("DEBUG") == 3 * 86400 and config.retention.keep_for("INFO") == 30 * 86400
    assert config.max_body_size == 16 * 1024**2 and config.listen_address() == ("::1", 9000)
    for overrides, key in [({"retention.levels": "LOUD=1d"}, "retention.levels"), ({"flush_interval": "soon"},
                           "flush_interval"), ({"listen": "nope"}, "listen"), ({"max_body": 1}, "max_body"),
                           ({"archive_id": "a/b"}, "archive_id"), ({"tls_cert": "c"}, "tls_cert")]:
        with pytest.raises(ConfigError, match=key):
            load_config(ArchiveConfig, overrides={**base, **overrides})
    with pytest.raises(ConfigError, match="root"):
        load_config(ArchiveConfig, overrides={"token_file": "t"})
