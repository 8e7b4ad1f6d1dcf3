"""WAL damage (issue 40 items 4 and 5): replay resynchronises past a damaged entry, reports it, keeps the
damaged segment aside, and sequence numbers never go backwards. In-process, on the real files."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ranklog.archive.wal import DAMAGED_DIR, HEADER_SIZE, KEY_FILE, PREAMBLE_SIZE, Wal
from ranklog.archive.wal_damage import losses


def _fill(directory, bodies, segment_size=1 << 30) -> Wal:
    wal = Wal(str(directory), segment_size)
    wal.open_for_append()
    for number, body in enumerate(bodies):
        wal.sync_to(wal.append(body, 2, 0, 1000 + number, records=100 + number))
    wal.close()
    return wal


def _segment(directory):
    return next(p for p in sorted(directory.iterdir()) if p.suffix == ".wal")


def _entry_start(data: bytes, index: int, body_size: int) -> int:
    return PREAMBLE_SIZE + index * (HEADER_SIZE + body_size)


def test_a_damaged_entry_costs_that_entry_only_and_its_segment_is_kept_aside(tmp_path):
    """Issue 40: 16 bytes flipped inside entry 10 of 50 once lost entries 10..50 and truncated the file."""
    directory = tmp_path / "wal"
    bodies = [bytes([n]) * 1000 for n in range(50)]
    _fill(directory, bodies)
    segment = _segment(directory)
    original = bytearray(segment.read_bytes())
    at = _entry_start(original, 9, 1000) + HEADER_SIZE + 300
    original[at:at + 16] = bytes(b ^ 0xA5 for b in original[at:at + 16])
    segment.write_bytes(bytes(original))

    wal = Wal(str(directory), 1 << 30)
    entries = list(wal.replay())
    assert [e.seq for e in entries] == [n for n in range(1, 51) if n != 10]
    assert [e.body for e in entries] == [b for n, b in enumerate(bodies) if n != 9]
    (damage,) = wal.damage
    assert (damage.entries, damage.records, damage.first_seq, damage.last_seq, damage.size) == (
        1, 109, 10, 10, HEADER_SIZE + 1000)
    assert damage.received_ns == 1009
    assert segment.stat().st_size == len(original)  # replay alone changes nothing on disk
    (kept,) = wal.set_aside()
    assert Path(kept).read_bytes() == bytes(original) and os.path.dirname(kept).endswith(DAMAGED_DIR)
    again = Wal(str(directory), 1 << 30)
    assert [e.seq for e in again.replay()] == [e.seq for e in entries] and again.damage == []
    assert segment.stat().st_size == len(original) - HEADER_SIZE - 1000


def test_a_damaged_header_is_resynchronised_past_and_counted_by_the_sequence_gap(tmp_path):
    directory = tmp_path / "wal"
    _fill(directory, [bytes([n]) * 500 for n in range(20)])
    segment = _segment(directory)
    data = bytearray(segment.read_bytes())
    for index in (4, 5):  # two neighbouring headers: one region
        at = _entry_start(data, index, 500)
        data[at + 6] ^= 0xFF
    segment.write_bytes(bytes(data))
    wal = Wal(str(directory), 1 << 30)
    assert [e.seq for e in wal.replay()] == [n for n in range(1, 21) if n not in (5, 6)]
    (damage,) = wal.damage
    assert (damage.entries, damage.records, damage.first_seq, damage.last_seq) == (2, None, 5, 6)
    assert damage.received_ns == 1003  # the entry before it: the nearest known arrival


def test_damage_at_the_end_of_the_newest_segment_is_not_taken_for_a_torn_tail(tmp_path):
    directory = tmp_path / "wal"
    _fill(directory, [b"a" * 200, b"b" * 200, b"c" * 200])
    segment = _segment(directory)
    data = bytearray(segment.read_bytes())
    data[_entry_start(data, 2, 200) + 10] ^= 0x01  # the last entry's header
    segment.write_bytes(bytes(data))
    wal = Wal(str(directory), 1 << 30)
    assert [e.body[:1] for e in wal.replay()] == [b"a", b"b"]
    (damage,) = wal.damage
    assert (damage.entries, damage.first_seq, damage.last_seq) == (1, 3, None)
    assert [(loss.entries, loss.first_seq) for loss in losses(wal.damage, flushed_seq=0)] == [(1, 3)]


def test_zeros_a_power_loss_left_at_the_end_are_a_torn_tail(tmp_path):
    directory = tmp_path / "wal"
    _fill(directory, [b"a" * 200, b"b" * 200])
    segment = _segment(directory)
    with open(segment, "ab") as handle:
        handle.write(b"\0" * 4096)
    wal = Wal(str(directory), 1 << 30)
    assert len(list(wal.replay())) == 2 and wal.damage == []


def test_an_entry_forged_inside_a_body_is_never_replayed(tmp_path):
    """A sender controls its body's bytes: a complete entry framed inside one (under another key)
    must not be taken for a real entry when resynchronising past damage just before it."""
    forger = tmp_path / "forger"
    _fill(forger, [b"FORGED " * 20])
    forged = _segment(forger).read_bytes()[PREAMBLE_SIZE:]
    directory = tmp_path / "wal"
    _fill(directory, [b"x" * 100, b"carrier:" + forged, b"y" * 100])
    segment = _segment(directory)
    data = bytearray(segment.read_bytes())
    data[_entry_start(data, 1, 100) + 3] ^= 0xFF  # the carrier's header
    segment.write_bytes(bytes(data))
    wal = Wal(str(directory), 1 << 30)
    bodies = [e.body for e in wal.replay()]
    assert bodies == [b"x" * 100, b"y" * 100]
    assert [(d.first_seq, d.last_seq) for d in wal.damage] == [(2, 2)]


def test_sequence_numbers_never_go_backwards_after_a_cut_or_a_lost_wal(tmp_path):
    directory = tmp_path / "wal"
    _fill(directory, [b"a"] * 5)
    for segment in directory.glob("*.wal"):
        segment.unlink()  # the WAL lost; Parquet and the snapshot cover seq 5
    wal = Wal(str(directory), 1 << 30)
    assert list(wal.replay()) == []
    wal.open_for_append(floor=5)
    assert wal.append(b"new", 2, 0, 1) == 6
    wal.close()
    # an empty newest segment (killed right after a rotation) still says where numbering stood
    (directory / f"{40:020d}.wal").write_bytes(b"")
    wal = Wal(str(directory), 1 << 30)
    assert [e.seq for e in wal.replay()] == [6]
    wal.open_for_append(floor=0)
    assert wal.append(b"newer", 2, 0, 1) >= 40


def test_the_key_file_is_private_and_a_lost_one_does_not_lose_the_segments(tmp_path):
    directory = tmp_path / "wal"
    _fill(directory, [b"a" * 10, b"b" * 10])
    assert (directory / KEY_FILE).stat().st_mode & 0o777 == 0o600
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in directory.glob("*.wal"))
    (directory / KEY_FILE).unlink()
    assert [e.body for e in Wal(str(directory), 1 << 30).replay()] == [b"a" * 10, b"b" * 10]


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(st.lists(st.integers(0, 600), min_size=3, max_size=25), st.lists(st.tuples(st.floats(0, 1), st.integers(1, 255)),
                                                                       min_size=1, max_size=4))
def test_random_damage_never_yields_a_wrong_entry_and_every_missing_one_is_reported(tmp_path_factory, sizes, flips):
    directory = tmp_path_factory.mktemp("wal")
    rng = np.random.default_rng(len(sizes))
    bodies = [rng.bytes(size) for size in sizes]
    _fill(directory, bodies, segment_size=2000)
    segments = sorted(p for p in directory.iterdir() if p.suffix == ".wal")
    blob = [bytearray(p.read_bytes()) for p in segments]
    total = sum(len(b) for b in blob)
    for where, mask in flips:
        at = min(int(where * total), total - 1)
        for data in blob:
            if at < len(data):
                if at >= PREAMBLE_SIZE:  # (a damaged preamble falls back to the key file: tested above)
                    data[at] ^= mask
                break
            at -= len(data)
    for path, data in zip(segments, blob, strict=True):
        path.write_bytes(bytes(data))
    wal = Wal(str(directory), 2000)
    got = {e.seq: e.body for e in wal.replay()}
    assert all(got[seq] == bodies[seq - 1] for seq in got)  # nothing replayed that was not written
    for seq in set(range(1, len(bodies) + 1)) - set(got):
        assert any(d.first_seq <= seq and (d.last_seq is None or seq <= d.last_seq) for d in wal.damage), seq
