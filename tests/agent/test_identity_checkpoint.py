"""File identity (dev+inode+head checksum) and atomic checkpoints."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ranklog.agent.checkpoint import CheckpointStore, FileCheckpoint
from ranklog.file_identity import HEAD_BYTES, head_matches, identify, make_source_id


def _identify(path: Path):
    fd = os.open(path, os.O_RDONLY)
    try:
        return identify(fd, os.fstat(fd))
    finally:
        os.close(fd)


def test_empty_file_has_no_identity_yet(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    path.write_bytes(b"")
    assert _identify(path) is None


def test_head_length_is_fixed_at_first_sight_and_survives_appends(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    path.write_bytes(b"first line\n")
    ident = _identify(path)
    assert ident.head_len == len(b"first line\n")
    with path.open("ab") as handle:
        handle.write(b"x" * (HEAD_BYTES * 3))
    fd = os.open(path, os.O_RDONLY)
    try:
        assert head_matches(fd, ident)
        assert identify(fd, os.fstat(fd)).head_len == HEAD_BYTES
    finally:
        os.close(fd)


def test_same_inode_with_new_content_is_a_different_file(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    path.write_bytes(b"2026-12-02 old content\n")
    ident = _identify(path)
    with path.open("r+b") as handle:  # rewrite in place: same dev/inode, different head
        handle.truncate(0)
        handle.write(b"2026-12-03 new content\n")
    fd = os.open(path, os.O_RDONLY)
    try:
        assert ident.same_inode(os.fstat(fd))
        assert not head_matches(fd, ident)
    finally:
        os.close(fd)
    assert make_source_id("n1", ident) != make_source_id("n1", _identify(path))


def test_source_id_names_host_and_generation(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    path.write_bytes(b"hello\n")
    ident = _identify(path)
    first, second = make_source_id("node1", ident), make_source_id("node2", ident)
    assert first.startswith("node1:") and second.startswith("node2:") and first != second
    assert make_source_id("node1", ident, 2) == first + "~g2"
    assert make_source_id("node1", ident) == first  # deterministic


def test_checkpoint_round_trip_is_atomic(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path / "state")
    assert store.load() == {}
    entry = FileCheckpoint("n:1:2:ab", "/x/a.log", 1, 2, 10, "ab", 1, 1234, {"actor": "WorkerDict_0:3"}, "ray", 2000)
    store.save({entry.source_id: entry})
    assert store.load() == {entry.source_id: entry}
    entry.offset = 2000
    store.save({entry.source_id: entry})
    assert store.load()[entry.source_id].offset == 2000
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == ["checkpoints.json"]
    assert json.loads((tmp_path / "state" / "checkpoints.json").read_text())["version"] == 1


def test_corrupt_checkpoint_is_reported_not_ignored(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    store.path.write_text("{not json")
    try:
        store.load()
    except ValueError as exc:
        assert "checkpoint" in str(exc)
    else:
        raise AssertionError("a corrupt checkpoint must not silently restart from zero")


def test_a_file_is_in_the_backlog_from_the_poll_that_finds_it(tmp_path: Path) -> None:
    """A file discovery just opened counts in the backlog gauge at once: a gauge of 0 until the next
    poll noted its size told a watcher (and a test waiting for idle) that nothing was left to ship
    while a busy first read round was still to come."""
    import prometheus_client

    from ranklog.agent.discover import Opened
    from ranklog.agent.file_tracker import FileTracker
    from ranklog.metrics import create
    from tests.agent.test_config_discover import _cfg

    cfg = _cfg(tmp_path, "--source", f"{tmp_path}/*.log")
    path = tmp_path / "train.log"
    path.write_bytes(b"2026-12-02 13:04:05,123 - t - INFO - hello\n" * 100)
    tracker = FileTracker(cfg, create("agent", prometheus_client.CollectorRegistry()))
    fd = os.open(path, os.O_RDONLY)
    spec = cfg.sources[0]
    tracker.poll({str(path): spec}, [Opened(str(path), spec, fd, os.fstat(fd))])
    try:
        assert tracker.stats()["files"] == 1
        assert tracker.backlog()[0] == path.stat().st_size
    finally:
        tracker.close()
