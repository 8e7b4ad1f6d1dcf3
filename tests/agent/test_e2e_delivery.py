"""End to end against the real archive: every line written arrives exactly once.

Real processes throughout: a writer rotating its log the way logrotate does, the agent, the archive;
the archive is read back with pyarrow.dataset and compared by (source_id, offset) and by content.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path

import pytest

from tests.agent.conftest import assert_exactly_once, finish, start_writer, wait_archived
from tests.agent.writer import line
from tests.helpers.agent_proc import running_agent
from tests.helpers.net import free_port

pytestmark = pytest.mark.slow


def test_files_appends_and_new_files_arrive_once(tmp_path: Path, token_file: Path, archive) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.jsonl").write_bytes(b"".join(line(i) for i in range(0, 3000)))
    with running_agent([archive.url], token_file, tmp_path / "state", sources=[f"{logs}/*.jsonl"],
                       extra_args=["--host", "node-a"]) as agent:
        agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 3000, what="first file")
        with (logs / "a.jsonl").open("ab") as handle:
            handle.write(b"".join(line(i) for i in range(3000, 4000)))
        started = time.monotonic()
        (logs / "b.jsonl").write_bytes(line(4000))
        agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 4001, timeout=30)
        assert time.monotonic() - started < 5  # picked up and shipped promptly
    table = wait_archived(tmp_path / "archive", 4001, columns=("source_id", "offset", "msg", "seq", "host", "source"))
    assert_exactly_once(table, set(range(4001)))
    assert set(table.column("host").to_pylist()) == {"node-a"}
    assert all(sid.startswith("node-a:") for sid in table.column("source_id").to_pylist())
    assert sorted(set(table.column("source").to_pylist())) == [str(logs / "a.jsonl"), str(logs / "b.jsonl")]


def test_rename_rotation_with_gzip_at_high_rate(tmp_path: Path, token_file: Path, archive) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    total = 40_000
    with running_agent([archive.url], token_file, tmp_path / "state", sources=[f"{logs}/app.log*:ranklog"]) as agent:
        # 8,000 lines/s rotates twice a second; unthrottled, ten rotations (and gzip + delete of the
        # uncompressed copy) fit in well under a poll period on a loaded CI core, and a file that is
        # gone before the agent ever saw it cannot be read by any tailer.
        writer = start_writer(logs / "app.log", "--lines", str(total), "--rate", "8000", "--rotate", "rename",
                              "--every", "4000", "--gzip", "--keep", "3", log_dir=tmp_path)
        finish(writer)
        assert (logs / "app.log.2.gz").exists() and (logs / "app.log.1").exists()
        agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= total, timeout=90)
        scrape = agent.wait_idle()
        assert scrape.value("ranklog_agent_lost_bytes_total") == 0
    assert_exactly_once(wait_archived(tmp_path / "archive", total), set(range(total)))


def test_copytruncate_starts_a_new_generation_and_loses_nothing_read(tmp_path: Path, token_file: Path, archive) -> None:
    """logrotate's copytruncate, after the agent caught up: nothing lost, nothing read twice."""
    logs = tmp_path / "logs"
    logs.mkdir()
    path, per_generation, generations = logs / "app.log", 3000, 5
    with running_agent([archive.url], token_file, tmp_path / "state", sources=[f"{path}:ranklog"]) as agent:
        read = 0
        for generation in range(generations):
            chunk = b"".join(line(seq) for seq in range(generation * per_generation, (generation + 1) * per_generation))
            with path.open("ab") as handle:
                handle.write(chunk)
            read += len(chunk)
            agent.wait_for(lambda s, want=read: s.value("ranklog_agent_bytes_read_total") >= want, what=f"{read} bytes")
            shutil.copyfile(path, logs / "app.log.1")
            os.truncate(path, 0)
        scrape = agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= generations * per_generation)
        assert scrape.value("ranklog_agent_lost_bytes_total") == 0
    table = wait_archived(tmp_path / "archive", generations * per_generation)
    assert_exactly_once(table, set(range(generations * per_generation)))
    assert len(set(table.column("source_id").to_pylist())) == generations  # one source_id per generation


def test_copytruncate_at_high_rate_never_duplicates(tmp_path: Path, token_file: Path, archive) -> None:
    """copytruncate racing a fast writer: lines written and truncated before the agent read them are
    gone (that is copytruncate's nature); the rest arrives exactly once and the loss is reported."""
    logs = tmp_path / "logs"
    logs.mkdir()
    total = 21_000  # the last 1,000 lines are never truncated
    with running_agent([archive.url], token_file, tmp_path / "state", sources=[f"{logs}/app.log:ranklog"]) as agent:
        writer = start_writer(logs / "app.log", "--lines", str(total), "--rotate", "copytruncate",
                              "--every", "4000", "--rate", "8000", log_dir=tmp_path)
        finish(writer)
        scrape = agent.wait_idle()
        lost = scrape.value("ranklog_agent_lost_bytes_total", reason="truncated")
        shipped = scrape.value("ranklog_agent_records_shipped_total")
    table = wait_archived(tmp_path / "archive", int(shipped))
    rows = table.to_pylist()
    # the agent's own loss records (one per truncation it caught the file short at) carry no seq
    losses = [row for row in rows if row["seq"] is None]
    assert all("were lost (truncated)" in row["msg"] for row in losses), losses
    seqs = [row["seq"] for row in rows if row["seq"] is not None]
    assert len(seqs) == len(set(seqs)), "a line was shipped twice"
    assert table.num_rows == shipped > 0
    missing = set(range(total)) - set(seqs)
    # What the agent saw of the missing lines is counted (a lower bound: bytes written and truncated
    # between two looks at the file cannot be known).
    assert lost <= sum(len(line(seq)) for seq in missing)
    assert set(range(20_000, total)) <= set(seqs)  # the last generation, never truncated, is complete


def test_kill_9_at_random_points_loses_and_duplicates_nothing(tmp_path: Path, token_file: Path, archive) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    total, rng = 24_000, random.Random(4)
    with running_agent([archive.url], token_file, tmp_path / "state", sources=[f"{logs}/*.log*:ranklog"],
                       extra_args=["--batch-bytes", "200KB"]) as agent:
        writer = start_writer(logs / "app.log", "--lines", str(total), "--rate", "4000", "--rotate", "rename",
                              "--every", "7000", log_dir=tmp_path)
        for _ in range(4):
            time.sleep(rng.uniform(0.4, 1.5))
            agent.kill()
            time.sleep(rng.uniform(0.0, 0.5))
            agent.start()
        finish(writer)
        agent.wait_for(lambda s: s.value("ranklog_agent_backlog_bytes") == 0
                       and s.value("ranklog_agent_files_tracked") >= 1, timeout=90, what="backlog 0")
    assert_exactly_once(wait_archived(tmp_path / "archive", total), set(range(total)))


def test_a_file_seen_while_its_head_was_short_keeps_its_key_across_a_kill(tmp_path: Path, token_file: Path,
                                                                           archive) -> None:
    """A file identified with fewer than HEAD_BYTES bytes (inotify finds it within moments of its
    creation) is keyed by that short head; if the agent dies before that key is checkpointed, the
    restart hashes the grown head, gets another source_id and ships the file again. The key is saved
    before the first byte ships (a long --checkpoint-interval keeps the periodic save out of it)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.jsonl").write_bytes(b"".join(line(i) for i in range(0, 20)))  # the first, periodic save
    with running_agent([archive.url], token_file, tmp_path / "state", sources=[f"{logs}/*.jsonl"],
                       extra_args=["--checkpoint-interval", "10min"]) as agent:
        agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 20, timeout=60)
        short = logs / "b.jsonl"
        short.write_bytes(b"".join(line(i) for i in range(20, 23)))  # 3 lines, well under HEAD_BYTES
        agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 23, timeout=60)
        agent.kill()
        with short.open("ab") as handle:
            handle.write(b"".join(line(i) for i in range(23, 100)))
        agent.start()
        agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 77, timeout=60)
        agent.wait_idle(timeout=60)
    assert_exactly_once(wait_archived(archive.root, 100), set(range(100)))


def test_archive_down_backlog_grows_then_everything_arrives_once(tmp_path: Path, token_file: Path) -> None:
    from tests.helpers.archive_proc import running_archive

    logs = tmp_path / "logs"
    logs.mkdir()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with running_agent([url], token_file, tmp_path / "state", sources=[f"{logs}/*.jsonl"],
                       extra_args=["--backoff-max", "1s"]) as agent:
        (logs / "a.jsonl").write_bytes(b"".join(line(i) for i in range(2000)))
        first = agent.wait_for(lambda s: s.value("ranklog_agent_backlog_bytes") > 0
                               and s.value("ranklog_agent_ship_failures_total", reason="connect") > 0, timeout=30)
        with (logs / "a.jsonl").open("ab") as handle:
            handle.write(b"".join(line(i) for i in range(2000, 3000)))
        grown = agent.wait_for(lambda s: s.value("ranklog_agent_backlog_bytes") > first.value("ranklog_agent_backlog_bytes")
                               and s.value("ranklog_agent_oldest_unshipped_seconds") >= 1.0, timeout=30)
        assert grown.value("ranklog_agent_records_shipped_total") == 0
        with running_archive(tmp_path / "archive", token_file, port=port):
            agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 3000, timeout=60)
            scrape = agent.wait_idle()
            assert scrape.value("ranklog_agent_oldest_unshipped_seconds") == 0
            table = wait_archived(tmp_path / "archive", 3000)
    assert_exactly_once(table, set(range(3000)))
