"""Size rotation (new parts, never renames) and retention (whole old parts deleted)."""

from __future__ import annotations

import os
import socket
import time

from ranklog.log.files import PartWriter
from ranklog.log.process_identity import Identity
from tests.helpers.log_files import ranklog_files, read_records, run_python

ROTATION = 20_000


def test_rotation_starts_numbered_parts_and_keeps_seq_continuous(tmp_path):
    run_python("""
        for i in range(2000):
            log.info("record %05d %s", i, "z" * 40)
            if i % 500 == 0:
                ranklog.flush()
    """, tmp_path, env={"RANKLOG_ROTATION": str(ROTATION), "RANK": "0"})
    files = ranklog_files(tmp_path)
    assert len(files) >= 5
    parts = [int(p.name.split(".")[-2]) for p in files]
    assert parts == list(range(len(files)))
    assert len({p.name.rsplit(".", 2)[0] for p in files}) == 1  # same rank and pid in every part
    seqs = []
    for path in files:
        assert path.stat().st_size <= ROTATION
        seqs += [r["seq"] for r in read_records(path)]
    assert seqs == list(range(1, 2001))


def test_retention_deletes_old_parts_of_this_host_only(tmp_path):
    host = socket.gethostname()
    old = time.time() - 3 * 86400
    stale = [tmp_path / "old-job" / host / "rank-0.pid-11.0000.jsonl", tmp_path / "nojob" / host / "rank-x.pid-12.0003.log"]
    keep = [
        tmp_path / "old-job" / host / "rank-0.pid-11.0001.jsonl",  # recent part of the same stream
        tmp_path / "old-job" / "other-host" / "rank-0.pid-11.0000.jsonl",  # another host's files
        tmp_path / "old-job" / host / "notes.txt",  # not a ranklog file
    ]
    for path in stale + keep:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}\n")
    for path in [*stale, keep[1], keep[2]]:
        os.utime(path, (old, old))
    run_python("log.info('fresh')", tmp_path, env={"RANKLOG_RETENTION": "1d"})
    assert not any(p.exists() for p in stale)
    assert all(p.exists() for p in keep)
    assert len([p for p in ranklog_files(tmp_path) if "nojob" in p.parts]) == 1  # the new file


def test_retention_zero_keeps_everything(tmp_path):
    host = socket.gethostname()
    path = tmp_path / "j" / host / "rank-0.pid-1.0000.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("{}\n")
    os.utime(path, (0, 0))
    run_python("log.info('fresh')", tmp_path, env={"RANKLOG_RETENTION": "0"})
    assert path.exists()


def test_reused_pid_continues_after_the_highest_existing_part(tmp_path):
    ident = Identity(host="h", ip="127.0.0.1", pid=1, rank=0, job="j")
    directory = tmp_path / "j" / "h"
    directory.mkdir(parents=True)
    for part in (0, 1, 4):
        (directory / f"rank-0.pid-1.{part:04d}.jsonl").write_text("old\n")
    writer = PartWriter(tmp_path, ident, "json", rotation=4096, retention=0)
    writer.write(['{"new":1}\n'])
    writer.close()
    assert writer.path == directory / "rank-0.pid-1.0005.jsonl"
    assert (directory / "rank-0.pid-1.0004.jsonl").read_text() == "old\n"


def test_a_line_longer_than_rotation_gets_a_part_of_its_own(tmp_path):
    ident = Identity(host="h", ip="127.0.0.1", pid=2)
    writer = PartWriter(tmp_path, ident, "json", rotation=4096, retention=0)
    writer.write(["a" * 100 + "\n", "b" * 10_000 + "\n", "c\n"])
    writer.close()
    files = sorted((tmp_path / "nojob" / "h").iterdir())
    assert [f.name for f in files] == [f"rank-x.pid-2.{i:04d}.jsonl" for i in range(3)]
    assert [len(f.read_bytes()) for f in files] == [101, 10_001, 2]
