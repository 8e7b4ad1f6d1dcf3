"""Fault scenarios: processes killed, archives unreachable, rotation storms, full disks, skewed clocks.

Every scenario counts what the writers wrote (`seq` 1..N per process) against what the archive
holds, and records written / archived / lost / duplicated / recovery time in RELIABILITY.md. The
bounded variants run in `make test`; `make soak` (RANKLOG_SOAK=1) runs them longer.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.accounting import wait_for_archive, wal_rows
from tests.helpers.agent_proc import running_agent
from tests.helpers.archive_proc import running_archive
from tests.helpers.procs import ranklog_cmd
from tests.reliability.conftest import SOAK
from tests.reliability.report import Row

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def start_writer(logs: Path, job: str, host: str, *, rate: float, seconds: float, rotate: str = "none",
                 rotate_every: float = 1.0, rank: int = 0, skew: float = 0.0,
                 first_rotation: float | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.seq_writer", "--dir", str(logs), "--job", job, "--host", host,
         "--rate", str(rate), "--seconds", str(seconds), "--rotate", rotate, "--rotate-every", str(rotate_every),
         "--rank", str(rank), "--skew", str(skew),
         *(["--first-rotation", str(first_rotation)] if first_rotation is not None else [])],
        cwd=REPO, stdout=subprocess.PIPE, text=True)


def finish_writer(proc: subprocess.Popen) -> dict[tuple[str, int], int]:
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out
    summary = json.loads(out.strip().splitlines()[-1])
    return {(summary["host"], summary["pid"]): summary["written"]}


def test_agent_killed_20_times_during_a_rotating_stream(tmp_path, token_file, record_row):
    """SIGKILL the agent 20 times at random moments while a writer streams ~50,000 lines/s with rename rotation."""
    seconds = 120 if SOAK else 12
    kills, job, logs = 20, "agent-kills", tmp_path / "logs"
    rng = random.Random(20)
    with running_archive(tmp_path / "archive", token_file) as archive, \
            running_agent([archive.url], token_file, tmp_path / "state", sources=[f"{logs}/**/*.jsonl*:ranklog"]) as agent:
        writer = start_writer(logs, job, "node-a", rate=50_000, seconds=seconds, rotate="rename")
        moments = sorted(rng.uniform(0.5, seconds - 0.5) for _ in range(kills))
        started = time.monotonic()
        for moment in moments:
            time.sleep(max(0.0, moment - (time.monotonic() - started)))
            agent.kill()
            agent.start()
        written = finish_writer(writer)
        stream_end = time.monotonic()
        tally, _ = wait_for_archive([archive.root], job, written, timeout=180)
        recovery = time.monotonic() - stream_end
    rate = sum(written.values()) / seconds
    false_alarms = unexpected_duplicate_warnings(agent.log())
    record_row(Row("agent SIGKILL ×20", f"{seconds} s stream at {rate:,.0f} lines/s (target 50,000) with rename "
                   "rotation every second; agent SIGKILLed 20 times at random moments and restarted",
                   "writer seq 1..N vs archive rows", tally.written, tally.archived, tally.lost, tally.duplicated,
                   recovery, "recovery = end of stream → last record archived; the restarts' re-sends raised "
                   f"{false_alarms} unexpected-duplicate warnings"))
    assert tally.lost == 0 and tally.duplicated == 0, tally
    assert false_alarms == 0  # a restart's re-sends are expected duplicates (issue 20, item 4)


def unexpected_duplicate_warnings(agent_log: str) -> int:
    """The agent's warnings that an archive held records it never sent (false alarms under faults)."""
    return agent_log.count("never sent before")


def test_archive_killed_5_times_during_ingest(tmp_path, token_file, record_row):
    """SIGKILL the archive 5 times while agents ship; it restarts on the same root and port."""
    seconds = 60 if SOAK else 12
    job, logs = "archive-kills", tmp_path / "logs"
    rng = random.Random(5)
    with running_archive(tmp_path / "archive", token_file) as archive, \
            running_agent([archive.url], token_file, tmp_path / "state", sources=[f"{logs}/**/*.jsonl*:ranklog"]) as agent:
        writer = start_writer(logs, job, "node-b", rate=20_000, seconds=seconds)
        started = time.monotonic()
        for moment in sorted(rng.uniform(1.0, seconds - 1.0) for _ in range(5)):
            time.sleep(max(0.0, moment - (time.monotonic() - started)))
            archive.stop(signal.SIGKILL)
            time.sleep(rng.uniform(0.1, 1.0))
            archive.start()
        written = finish_writer(writer)
        stream_end = time.monotonic()
        tally, _ = wait_for_archive([archive.root], job, written, timeout=180)
        recovery = time.monotonic() - stream_end
        false_alarms = unexpected_duplicate_warnings(agent.log())
    record_row(Row("archive SIGKILL ×5 (ingest)", f"{seconds} s stream at 20,000 lines/s; the archive SIGKILLed 5 "
                   "times mid-ingest and restarted on the same root", "writer seq vs archive rows",
                   tally.written, tally.archived, tally.lost, tally.duplicated, recovery,
                   f"re-sends of requests cut by the kills raised {false_alarms} unexpected-duplicate warnings"))
    assert tally.lost == 0 and tally.duplicated == 0, tally
    assert false_alarms == 0  # a request that may have been stored before the kill is an expected re-send


def test_archive_unreachable_then_everything_arrives(tmp_path, token_file, record_row):
    """The archive process is stopped for a while: the backlog metric rises, then everything arrives once."""
    outage = 120 if SOAK else 15
    job, logs = "outage", tmp_path / "logs"
    with running_archive(tmp_path / "archive", token_file) as archive, \
            running_agent([archive.url], token_file, tmp_path / "state", sources=[f"{logs}/**/*.jsonl*:ranklog"]) as agent:
        writer = start_writer(logs, job, "node-c", rate=5_000, seconds=outage + 2)
        time.sleep(2)
        archive.stop(signal.SIGTERM)
        agent.wait_for(lambda s: s.value("ranklog_agent_backlog_bytes") > 100_000, timeout=outage,
                       what="backlog rising during the outage")
        peak = agent.scrape().value("ranklog_agent_backlog_bytes")
        time.sleep(max(0.0, outage - 2))
        peak = max(peak, agent.scrape().value("ranklog_agent_backlog_bytes"))
        written = finish_writer(writer)
        back = time.monotonic()
        archive.start()
        tally, _ = wait_for_archive([archive.root], job, written, timeout=180)
        recovery = time.monotonic() - back
        failures = agent.scrape().value("ranklog_agent_ship_failures_total")
    record_row(Row(f"archive unreachable {outage} s", f"archive process stopped for {outage} s during a 5,000 lines/s "
                   "stream, then started again", "backlog metric rises; writer seq vs archive rows",
                   tally.written, tally.archived, tally.lost, tally.duplicated, recovery,
                   f"peak backlog {peak / 1e6:.1f} MB, {failures:.0f} failed ship attempts; recovery = restart → all archived"))
    assert peak > 100_000 and failures > 0
    assert tally.lost == 0 and tally.duplicated == 0, tally


ROTATION_MODES = {
    # mode: (glob below the mode's dir, lost-bytes reason the agent reports, loss acceptable?)
    "rename": ("**/*.jsonl*", None, False),
    "gzip": ("**/*.jsonl*", None, False),
    "copytruncate": ("**/*.jsonl", "truncated", True),
    "copytruncate-olddir": ("**/*.jsonl", "truncated", True),
    "delete": ("**/*.jsonl*", "deleted", True),
}


def test_rotation_storms(tmp_path, token_file, record_row):
    """Rename, copytruncate (copy beside the file, and copy moved to an olddir), gzip and
    delete-before-shipped rotation every second, all at once. The first rotation comes 3 s after a
    writer starts, so even on a loaded machine the agent has discovered the file: a file rotated away
    before any tailer saw it is outside what a tailer can know.

    rename and gzip must be exact. copytruncate with the copy beside the file must be exact too: the
    agent reads the unread tail of the old generation from the copy. delete, and copytruncate whose
    copy went to another directory, lose what the agent had not read at that moment; what the agent
    saw of it is reported — lost bytes in the metric and, for copytruncate, loss notices in the
    archive that ``ranklog integrity`` lists for that mode's files. What the agent never saw
    (written and rotated away after its last look) cannot be known by any tailer, so the reported
    bytes are a lower bound; the row records the true loss beside them. Nothing may ever be
    duplicated.
    """
    seconds = 60 if SOAK else 12
    rate = 10_000
    with running_archive(tmp_path / "archive", token_file) as archive:
        sources = [f"{tmp_path / mode}/{pattern}:ranklog" for mode, (pattern, _, _) in ROTATION_MODES.items()]
        with running_agent([archive.url], token_file, tmp_path / "state", sources=sources) as agent:
            writers = {mode: start_writer(tmp_path / mode, f"rotate-{mode}", f"node-{mode}", rate=rate,
                                          seconds=seconds, rotate=mode, first_rotation=3.0)
                       for mode in ROTATION_MODES}
            written = {mode: finish_writer(proc) for mode, proc in writers.items()}
            end = time.monotonic()
            scrape = agent.wait_idle(timeout=300)  # all read and acknowledged: what is missing now is lost
            recovery = time.monotonic() - end
            tallies = {mode: wait_for_archive([archive.root], f"rotate-{mode}", counts, timeout=10)[0]
                       for mode, counts in written.items()}
            from_copy = agent.log().count("from its copy")
    checks = {mode: subprocess.run(ranklog_cmd("integrity", "--archive", str(tmp_path / "archive"), "--job",
                                               f"rotate-{mode}", "--json"), capture_output=True, text=True, timeout=300)
              for mode in ROTATION_MODES}
    reports = {mode: json.loads(proc.stdout) for mode, proc in checks.items()}
    reported = {mode: report["agent_lost_bytes"] for mode, report in reports.items()}
    failures = []
    for mode, tally in tallies.items():
        _, reason, lossy = ROTATION_MODES[mode]
        lost_bytes = scrape.value("ranklog_agent_lost_bytes_total", reason=reason) if reason else 0.0
        report = reports[mode]
        note = f"`ranklog integrity --job`: {report['missing_records']:,} missing (seq gaps)"
        if mode.startswith("copytruncate"):
            note += f", {reported[mode]:,} lost bytes reported by the agent (loss notices)"
        elif reason:
            note += f"; lost bytes reported ({reason}): {lost_bytes:,.0f}"
        if mode == "copytruncate":
            note += f"; {from_copy} truncations finished from the copy beside the file"
        record_row(Row(f"rotation storm: {mode}", f"{seconds} s at {rate:,} lines/s, {mode} rotation every second",
                       "writer seq vs archive rows" + ("; exact: the unread tail is read from the copy"
                                                       if mode == "copytruncate" else
                                                       "; lost records ⇒ `ranklog integrity` fails (seq gaps, loss notices)" if lossy else ""),
                       tally.written, tally.archived, tally.lost, tally.duplicated, recovery, note))
        exact = mode in ("rename", "gzip", "copytruncate")
        silent = tally.lost and checks[mode].returncode != 1  # lost, and integrity did not say so
        if tally.duplicated or (tally.lost and exact) or silent:
            failures.append((mode, tally, lost_bytes, reported[mode], report["missing_records"]))
    assert not failures, failures


@pytest.fixture
def small_disk(tmp_path):
    """A real 64 MiB filesystem (tmpfs) for the archive root; needs root to mount."""
    import os

    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (make test runs as root on CI)")
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(path: Path, leave: int) -> None:
    """Write zeros into `path` until only `leave` bytes stay free on its filesystem."""
    import shutil

    free = shutil.disk_usage(path.parent).free
    with open(path, "wb") as handle:
        remaining = max(0, free - leave)
        block = b"\0" * (1 << 20)
        while remaining > 0:
            handle.write(block[: min(len(block), remaining)])
            remaining -= len(block)


def test_archive_disk_fills_up(small_disk, tmp_path, token_file, record_row):
    """The archive's filesystem fills: 507s and no corrupt or partial Parquet; full recovery once freed."""
    import pyarrow.parquet as pq

    job, logs = "disk-full", tmp_path / "logs"
    root = small_disk / "archive"
    full_for = 60 if SOAK else 8
    with running_archive(root, token_file, extra_args=["--disk-reserve", "16MiB"],
                         log_path=tmp_path / "archive.log") as archive, \
            running_agent([archive.url], token_file, tmp_path / "state", sources=[f"{logs}/**/*.jsonl*:ranklog"]) as agent:
        writer = start_writer(logs, job, "node-d", rate=10_000, seconds=full_for + 6)
        time.sleep(2)
        balloon = small_disk / "balloon"
        _fill(balloon, leave=8 << 20)
        agent.wait_for(lambda s: s.value("ranklog_agent_ship_failures_total", reason="disk_full") > 0,
                       timeout=30, what="507 answers while the disk is full")
        time.sleep(full_for)
        rejected = agent.scrape().value("ranklog_agent_ship_failures_total", reason="disk_full")
        balloon.unlink()
        freed = time.monotonic()
        written = finish_writer(writer)
        tally, _ = wait_for_archive([archive.root], job, written, timeout=120)
        recovery = time.monotonic() - freed
    files = list(root.rglob("*.parquet"))
    visible = [f for f in files if not f.name.startswith((".", "_"))]
    for path in visible:
        pq.read_metadata(path)  # raises on a partial or corrupt file
    record_row(Row("archive disk full", f"archive root on a 64 MiB tmpfs filled to below the 16 MiB reserve for "
                   f"{full_for} s during a 10,000 lines/s stream, then freed",
                   "507 seen by the agent; every visible Parquet file's footer reads; writer seq vs archive rows",
                   tally.written, tally.archived, tally.lost, tally.duplicated, recovery,
                   f"{rejected:.0f} requests answered 507; {len(visible)} Parquet files all readable; "
                   "recovery = space freed → all archived"))
    assert rejected > 0
    assert tally.lost == 0 and tally.duplicated == 0, tally


def test_clock_skew_between_nodes(tmp_path, token_file, record_row):
    """Three nodes whose clocks are −5 min, 0 and +5 min: nothing is lost or duplicated."""
    job, logs = "skew", tmp_path / "logs"
    seconds = 30 if SOAK else 6
    with running_archive(tmp_path / "archive", token_file) as archive, \
            running_agent([archive.url], token_file, tmp_path / "state", sources=[f"{logs}/**/*.jsonl*:ranklog"]):
        writers = [start_writer(logs, job, f"node-{i}", rate=5_000, seconds=seconds, rank=i, skew=skew)
                   for i, skew in enumerate((-300.0, 0.0, 300.0))]
        written: dict[tuple[str, int], int] = {}
        for proc in writers:
            written.update(finish_writer(proc))
        end = time.monotonic()
        tally, _ = wait_for_archive([archive.root], job, written, timeout=120)
        recovery = time.monotonic() - end
    record_row(Row("clock skew ±5 min", "three writers whose timestamps are skewed by −300 s, 0 and +300 s "
                   "(records land in different hour partitions near the hour)", "writer seq vs archive rows "
                   "(the verdict under skew is covered by tests/triage's clock-skew scenario)",
                   tally.written, tally.archived, tally.lost, tally.duplicated, recovery))
    assert tally.lost == 0 and tally.duplicated == 0, tally


def test_three_archives_six_agents_one_archive_killed(tmp_path, token_file, record_row):
    """Three archive instances on one shared root, six agents with the endpoint list; one archive is
    SIGKILLed mid-stream and stays down for the rest of the stream: agents fail over, and every
    record is either in the shared root or in the dead archive's WAL (acknowledged = durable; a
    killed archive's last unflushed second waits on its own disk). Restarted, as systemd does, it
    flushes that WAL: the union then holds every record exactly once and `ranklog query` over the
    shared root counts exactly what was written."""
    from contextlib import ExitStack

    job, root = "scale-out", tmp_path / "shared-root"
    seconds = 60 if SOAK else 10
    with ExitStack() as stack:
        archives = [stack.enter_context(running_archive(
            root, token_file, extra_args=["--archive-id", f"arch{i}", "--state-dir", str(tmp_path / f"state-arch{i}")],
            log_path=tmp_path / f"arch{i}.log")) for i in range(3)]
        urls = [a.url for a in archives]
        # All agents first, then all writers at once: the kill lands half-way through every stream.
        agents = [stack.enter_context(running_agent(urls, token_file, tmp_path / f"agent-state{i}",
                                                    sources=[f"{tmp_path / f'node{i}'}/**/*.jsonl*:ranklog"]))
                  for i in range(6)]
        writers = [start_writer(tmp_path / f"node{i}", job, f"node{i}", rate=3_000, seconds=seconds, rank=i)
                   for i in range(6)]
        time.sleep(seconds / 2)
        archives[1].stop(signal.SIGKILL)
        killed_at = time.monotonic()
        written: dict[tuple[str, int], int] = {}
        for proc in writers:
            written.update(finish_writer(proc))
        in_wal = wal_rows(tmp_path / "state-arch1", job)
        while_down, _ = wait_for_archive([root], job, written, timeout=60, extra=[in_wal])
        recovery = time.monotonic() - killed_at
        failovers = sum(agent.scrape().value("ranklog_agent_ship_failures_total") for agent in agents)
        archives[1].start()
        tally, _ = wait_for_archive([root], job, written, timeout=60)
    counted = subprocess.run([sys.executable, "-m", "ranklog", "query", "--archive", str(root), "--job", job, "--count"],
                             capture_output=True, text=True, timeout=120)
    record_row(Row("3 archives, 6 agents, 1 archive killed", f"{seconds} s, six writers at 3,000 lines/s each, one "
                   "agent per writer with all three endpoints; archive 2 of 3 SIGKILLed half-way, down for the "
                   "rest of the stream, then restarted",
                   "union of the shared root vs writer seq; `ranklog query --count` over the root",
                   tally.written, tally.archived, tally.lost, tally.duplicated, recovery,
                   f"{failovers:.0f} failed attempts rerouted; while down, {in_wal.num_rows} acknowledged "
                   f"records waited in the dead archive's WAL (lost otherwise: {while_down.lost}); "
                   f"query --count = {counted.stdout.strip()}; recovery = kill → all archived or in that WAL"))
    assert while_down.lost == 0, while_down
    assert tally.lost == 0, tally
    # Rows stored twice by two archives (a lost ACK during the kill) are allowed on disk only if the
    # reader folds them: what query returns must be exact.
    assert counted.returncode == 0, counted.stderr
    assert int(counted.stdout.strip().replace(",", "")) == tally.written


def _compaction_in_flight(root: Path, hour_dirs: list[Path]) -> bool:
    """A merged file is being written (a .tmp in an old hour) or the archive holds an hour's lease
    (reading, merging or committing; archive.leases)."""
    for directory in hour_dirs:
        if any(p.name.endswith(".parquet.tmp") for p in directory.iterdir()):
            return True
        try:
            if json.loads((directory / "_ranklog_lease.json").read_text()).get("expires", 0) > 0:
                return True
        except (FileNotFoundError, ValueError):
            continue
    return False


def test_archive_killed_during_compaction(tmp_path, token_file, record_row):
    """Many small files of closed hours; the archive is SIGKILLed while it merges them; after a
    restart the merge completes and every record is there exactly once."""
    job, logs, root = "compaction-kill", tmp_path / "logs", tmp_path / "archive"
    small_files = ["--flush-interval", "0.2", "--compaction-interval", "1h"]
    with running_archive(root, token_file, extra_args=small_files) as archive, \
            running_agent([archive.url], token_file, tmp_path / "state", sources=[f"{logs}/**/*.jsonl*:ranklog"]):
        # Records three hours in the past: their hour is closed, so compaction takes them at once.
        written = finish_writer(start_writer(logs, job, "node-e", rate=20_000, seconds=6, skew=-3 * 3600))
        tally_before, _ = wait_for_archive([root], job, written, timeout=120)
        archive.stop()
        files_before = len([p for p in root.rglob("*.parquet") if not p.name.startswith(".")])
        hour_dirs = sorted({p.parent for p in root.rglob("*.parquet")})
        archive.extra_args = ("--compaction-interval", "0.2", "--compaction-target-size", "1GB")
        archive.proc = None
        archive.start()
        deadline = time.monotonic() + 60
        while not _compaction_in_flight(root, hour_dirs) and time.monotonic() < deadline:
            time.sleep(0.002)
        caught = _compaction_in_flight(root, hour_dirs)
        archive.stop(signal.SIGKILL)
        restarted = time.monotonic()
        archive.start()
        merged_deadline = time.monotonic() + 90
        while time.monotonic() < merged_deadline:
            files_after = len([p for p in root.rglob("*.parquet") if not p.name.startswith(".")])
            if files_after < files_before and not _compaction_in_flight(root, hour_dirs):
                break
            time.sleep(0.2)
        tally, _ = wait_for_archive([root], job, written, timeout=30)
        recovery = time.monotonic() - restarted
    record_row(Row("archive SIGKILL during compaction", f"{files_before} small Parquet files of closed hours "
                   f"({tally_before.archived:,} records); the archive SIGKILLed while merging them "
                   f"({'caught a held hour lease or a temp file' if caught else 'no merge in flight was seen'}), "
                   "then restarted", "writer seq vs archive rows; file count drops after restart",
                   tally.written, tally.archived, tally.lost, tally.duplicated, recovery,
                   f"{files_before} → {files_after} files; recovery = restart → merge done"))
    assert caught, "the kill did not land during a compaction"
    assert files_after < files_before
    assert tally.lost == 0 and tally.duplicated == 0, tally
