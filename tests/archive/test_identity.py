"""Per-node identity (issue 20, item 4): tokens bound to hosts, identity-namespaced dedup keys, and
WAL entries that carry the identity so replay rebuilds the same keys."""

from __future__ import annotations

import pyarrow as pa
import pytest

from ranklog.archive.auth import SHARED, Caller, TokenFileError, TokenStore, foreign_hosts, parse_tokens
from ranklog.archive.dedup import DedupIndex
from ranklog.archive.wal import Wal


def _keys(source: str, offsets: list[int], host: str = "node-b") -> pa.Table:
    n = len(offsets)
    return pa.table({"source_id": [source] * n, "offset": pa.array(offsets, pa.int64()), "host": [host] * n})


def test_tokens_file_binds_tokens_to_identities_and_keeps_the_old_format(tmp_path):
    path = tmp_path / "tokens"
    path.write_text("# comment\nshared-secret\n\ntok-a node-a\ntok-gpu gpu-rack7 gpu-7-* gpu-7.example.com\n"
                    "tok-a2 node-a\n")
    store = TokenStore(str(path))
    assert store.identify("Bearer shared-secret") == SHARED
    assert store.identify("Bearer tok-a") == Caller("node-a", ("node-a",))  # no pattern: its own name
    assert store.identify("Bearer tok-a2") == Caller("node-a", ("node-a",))  # rotation: two tokens, one identity
    gpu = store.identify("bearer tok-gpu")
    assert gpu is not None and gpu.identity == "gpu-rack7"
    assert gpu.may_write("gpu-7-12") and gpu.may_write("gpu-7.example.com") and not gpu.may_write("gpu-8-1")
    assert store.identify("Bearer tok-b") is None and store.identify(None) is None
    assert store.identify("Basic tok-a") is None and store.check("Bearer shared-secret")
    assert SHARED.may_write("anything")


def test_foreign_hosts_names_what_a_bound_token_may_not_write():
    caller = Caller("node-a", ("node-a", "node-a-*"))
    assert foreign_hosts(["node-a", "node-a-gpu1", None, ""], caller) == []  # no host claims no node
    assert foreign_hosts(["node-b", "node-a", "node-b", "x"], caller) == ["node-b", "x"]
    assert foreign_hosts(["node-b"], SHARED) == []


@pytest.mark.parametrize(("text", "message"), [
    ("tok-a node-a\ntok-a node-b\n", "already listed with another identity"),
    ("tok-a node/a\n", "identity 'node/a' must be"),
])
def test_bad_tokens_file_lines_fail_naming_the_line_not_the_token(tmp_path, text, message):
    with pytest.raises(TokenFileError, match=message) as info:
        parse_tokens(text.encode().splitlines(), "tokens")
    assert "tokens:2" in str(info.value) or "tokens:1" in str(info.value)
    assert "tok-a" not in str(info.value)
    (tmp_path / "tokens").write_text(text)
    with pytest.raises(OSError, match="cannot use token file"):
        TokenStore(str(tmp_path / "tokens"))


def test_a_bad_reload_keeps_the_previous_tokens(tmp_path):
    path = tmp_path / "tokens"
    path.write_text("tok-a node-a\n")
    store = TokenStore(str(path), check_every=0)
    path.write_text("tok-a node-a\ntok-a node-b\n")
    assert store.identify("Bearer tok-a") == Caller("node-a", ("node-a",))


def test_dedup_keys_are_namespaced_by_identity():
    """The forged-key attack: node A's token writes B's source_id at offsets 0 and 10^15; B's own
    records at those offsets are still new in B's namespace, and A's re-send is A's duplicate."""
    index = DedupIndex()
    forged = _keys("node-b:801:1f:abc", [0, 10**15])
    assert index.apply(forged, now=1.0, identity="node-a").tolist() == [True, True]
    real = _keys("node-b:801:1f:abc", [0, 57, 10**15])
    assert index.apply(real, now=2.0, identity="node-b").tolist() == [True, True, True]
    assert index.apply(real, now=3.0, identity="node-b").tolist() == [False, False, False]
    assert index.apply(forged, now=3.0, identity="node-a").tolist() == [False, False]
    # shared tokens have one namespace of their own: they cannot shadow a bound node either
    assert index.apply(real, now=4.0).tolist() == [True, True, True]
    assert index.apply(real, now=4.0).tolist() == [False, False, False]
    # the snapshot keeps the namespaces apart
    restored = DedupIndex.restore(index.snapshot())
    assert len(restored) == 3
    for identity in ("node-a", "node-b", None):
        assert not restored.apply(_keys("node-b:801:1f:abc", [0]), now=5.0, identity=identity).any()
    assert restored.apply(_keys("node-b:801:1f:abc", [0]), now=5.0, identity="node-c").all()


def test_staged_rollback_is_per_namespace():
    index = DedupIndex()
    index.apply(_keys("s", [0]), now=1.0, identity="node-a")
    with pytest.raises(OSError), index.staged(_keys("s", [0, 10]), 2.0, identity="node-b"):
        raise OSError("disk gone")
    assert index.apply(_keys("s", [0, 10]), now=3.0, identity="node-b").tolist() == [True, True]
    assert index.apply(_keys("s", [0]), now=3.0, identity="node-a").tolist() == [False]


def test_a_snapshot_written_before_identities_restores_as_shared_keys():
    old = pa.table({"source_id": ["s", "t"], "lo": pa.array([0, 5], pa.int64()), "hi": pa.array([9, 5], pa.int64()),
                    "touched": pa.array([1.0, 1.0])})
    index = DedupIndex.restore(old)
    assert index.apply(_keys("s", [3]), now=2.0).tolist() == [False]
    assert index.apply(_keys("s", [3]), now=2.0, identity="node-a").tolist() == [True]


def _legacy_entry(seq: int, received: int, body: bytes, identity: str | None = None) -> bytes:
    """An entry as archives wrote it before the keyed framing: RLW1, or RLW2 with an identity."""
    import struct
    import zlib

    name = identity.encode() if identity is not None else b""
    head = struct.pack("<4sQqQBBH", b"RLW1" if identity is None else b"RLW2", seq, received, len(name) + len(body),
                       2, 0, len(name))
    return head + struct.pack("<I", zlib.crc32(name + body, zlib.crc32(head))) + name + body


def test_wal_entries_carry_the_identity_and_old_entries_stay_readable(tmp_path):
    (tmp_path / "wal").mkdir()
    (tmp_path / "wal" / f"{1:020d}.wal").write_bytes(  # a segment of an archive from before the keyed framing
        _legacy_entry(1, 111, b"old shared") + _legacy_entry(2, 222, b"old bound", "node-a"))
    wal = Wal(str(tmp_path / "wal"), segment_size=1 << 20)
    assert [(e.seq, e.body, e.identity) for e in wal.replay()] == [(1, b"old shared", None), (2, b"old bound", "node-a")]
    wal.open_for_append()
    wal.append(b"shared body", 2, 0, 333)
    wal.append(b"bound body", 1, 0, 444, identity="node-a")
    wal.append(b"", 2, 0, 555, identity="gpu-rack7")
    wal.close()
    entries = list(Wal(str(tmp_path / "wal"), 1 << 20).replay())
    assert [(e.seq, e.body, e.identity, e.content_type, e.received_ns) for e in entries] == [
        (1, b"old shared", None, 2, 111), (2, b"old bound", "node-a", 2, 222), (3, b"shared body", None, 2, 333),
        (4, b"bound body", "node-a", 1, 444), (5, b"", "gpu-rack7", 2, 555)]


def test_a_corrupt_identity_entry_is_reported_and_the_others_replayed(tmp_path):
    wal = Wal(str(tmp_path / "wal"), segment_size=1 << 20)
    wal.open_for_append()
    wal.append(b"first", 2, 0, 1, identity="node-a", records=1)
    wal.append(b"second", 2, 0, 2, identity="node-a", records=1)
    wal.append(b"third", 2, 0, 3, identity="node-a", records=1)
    wal.close()
    segment = next(p for p in (tmp_path / "wal").iterdir() if p.suffix == ".wal")
    data = bytearray(segment.read_bytes())
    data[data.index(b"second") - 2] ^= 0xFF  # inside the second entry's identity
    segment.write_bytes(bytes(data))
    replayed = Wal(str(tmp_path / "wal"), 1 << 20)
    assert [e.body for e in replayed.replay()] == [b"first", b"third"]
    assert [(d.entries, d.records, d.first_seq, d.last_seq) for d in replayed.damage] == [(1, 1, 2, 2)]
