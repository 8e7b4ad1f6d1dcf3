"""``ranklog query -n N`` and ``-f/--follow`` (ranklog.query.follow): the last N records in time order,
then every new record as it arrives — from a raw log folder, a local archive root and a running
archive (its /v1/tail) — each shown once, within 2 s of the training process logging it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from tests.helpers.agent_proc import running_agent
from tests.helpers.archive_proc import running_archive
from tests.helpers.procs import ranklog_cmd
from tests.helpers.query_data import write_archive

LATENCY_S = 2.0
# A training process: logs one line through the ranklog logger and says when (monotonic clock, shared
# by every process of this machine), then keeps running as a rank would.
_RANK = textwrap.dedent("""
    import sys, time
    import ranklog
    log = ranklog.get_logger("train")
    sys.stdin.readline()
    log.info(sys.argv[1])
    print(time.monotonic(), flush=True)
    time.sleep(30)
""")


class Follow:
    """A `ranklog query … -f` process and the lines it printed, with the time each arrived."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(ranklog_cmd("query", *args, "-f", "--format", "raw"), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.lines: list[tuple[float, str]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line))

    def first(self, text: str, timeout: float = 30.0) -> float:
        """When the first line holding `text` arrived (waits for it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for at, line in list(self.lines):
                if text in line:
                    return at
            if self.proc.poll() is not None:
                break
            time.sleep(0.01)
        raise AssertionError(f"{text!r} not shown: {self.lines[-5:]} {self.proc.stderr.read() if self.proc.poll() else ''}")

    def count(self, text: str) -> int:
        return sum(text in line for _, line in self.lines)

    def records(self) -> int:
        """Records shown: raw output continues a record (its traceback) on indented lines."""
        return sum(not line.startswith(" ") for _, line in self.lines)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Rank:
    """A training process that logs `message` when told to and returns when it did."""

    def __init__(self, logs: Path, message: str, rank: int = 0) -> None:
        env = {**os.environ, "RANKLOG_LOG_DIR": str(logs), "RANKLOG_JOB": "follow-job", "RANK": str(rank)}
        self.proc = subprocess.Popen([sys.executable, "-c", _RANK, message], env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def log(self) -> float:
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def wait_for_text(logs: Path, text: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if logs.is_dir() and any(text in f.read_text(errors="replace") for f in logs.rglob("*") if f.is_file()):
            return
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never written under {logs}")


def shown_within(follows: dict[str, Follow], logs: Path, message: str) -> dict[str, float]:
    rank = Rank(logs, message)
    try:
        time.sleep(0.5)  # the interpreter and ranklog imported: the clock starts at the log call
        logged = rank.log()
        return {name: follow.first(message) - logged for name, follow in follows.items()}
    finally:
        rank.stop()


@pytest.mark.parametrize("kind", ["archive", "log_dir"])
def test_tail_is_the_last_n_in_time_order(kind, everyday_job):
    logs, archive, _ = everyday_job
    where = ["--archive", str(archive)] if kind == "archive" else ["--log_dir", str(logs)]

    def ndjson(*args: str) -> list[dict]:
        proc = subprocess.run(ranklog_cmd("query", *where, *args, "--format", "ndjson", "--columns", "ts,source,offset"),
                              capture_output=True, text=True, timeout=120)
        return [json.loads(line) for line in proc.stdout.splitlines()]

    everything = ndjson()
    assert len(everything) > 7 and ndjson("-n", "7") == everything[-7:]
    assert ndjson("--tail", "3", "--level", "WARNING") == ndjson("--level", "WARNING")[-3:]


def test_follow_a_raw_folder(tmp_path):
    logs = tmp_path / "logs"
    first = Rank(logs, "before the follow started")
    first.log()
    # The logger's writer thread puts the line on disk within its flush interval: a follow of a folder
    # that does not exist yet is an error (a mistyped path must not wait forever), so wait for the file.
    wait_for_text(logs, "before the follow started")
    follow = Follow("--log_dir", str(logs), "-n", "1")
    try:
        follow.first("before the follow started")
        latency = shown_within({"raw folder": follow}, logs, "logged while following")
        assert latency["raw folder"] < LATENCY_S, latency
        assert follow.count("before the follow started") == 1
    finally:
        follow.stop()
        first.stop()


def test_follow_a_local_and_a_remote_archive_fed_by_an_agent(tmp_path):
    token, logs = tmp_path / "token", tmp_path / "logs"
    token.write_text("follow-token-0123456789abcdef\n")
    logs.mkdir()
    with running_archive(tmp_path / "archive", token) as archive, \
            running_agent([archive.url], token, tmp_path / "state", presets=["ranklog"],
                          extra_args=["--ranklog-log-dir", str(logs)]):
        follows = {"local": Follow("--archive", str(tmp_path / "archive"), "-n", "0"),
                   "remote": Follow("--archive", archive.url, "--token-file", str(token), "-n", "0")}
        try:
            time.sleep(2)  # both are following (and nothing was there to show)
            warm = shown_within(follows, logs, "the first line of the job")
            latencies = [shown_within(follows, logs, f"step {i} done") for i in range(3)]
            assert all(value < LATENCY_S for one in latencies for value in one.values()), (warm, latencies)
            assert {name: f.count("step 1 done") for name, f in follows.items()} == {"local": 1, "remote": 1}
        finally:
            for follow in follows.values():
                follow.stop()


def test_follow_skips_compaction_outputs_and_shows_new_flushes(tmp_path, everyday_job):
    """A compaction output holds rows already shown (its footer says so): following must not repeat
    them; a flush file that appears after it is shown."""
    import pyarrow.compute as pc

    from ranklog.parse.directory import read_log_dir

    logs, _, _ = everyday_job
    table = read_log_dir(str(logs))
    old, new = table.filter(pc.not_equal(table["rank"], 3)), table.filter(pc.equal(table["rank"], 3))
    root = tmp_path / "archive"
    write_archive(old, root, files_per_hour=2)
    follow = Follow("--archive", str(root), "-n", str(old.num_rows))
    try:
        follow.first(" r0 ")
        time.sleep(0.5)
        shown = follow.records()
        write_archive(old, root, archive_id="a1", files_per_hour=1)  # what compaction of those hours writes
        time.sleep(1.5)
        write_archive(new, root, archive_id="a2", files_per_hour=2)
        follow.first(" r3 ")
        time.sleep(0.5)
        assert shown == old.num_rows and follow.records() == old.num_rows + new.num_rows
    finally:
        follow.stop()
