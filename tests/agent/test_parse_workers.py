"""Parse worker processes (``parse_workers``): the same records as the reading thread's parse, nothing
lost or doubled when a worker is killed, and a clear error for a bad setting."""

from __future__ import annotations

import itertools
import os
import random
import shutil
import signal
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ranklog.agent.agent_config import allowed_cpus, default_parse_workers
from ranklog.errors import ConfigError
from ranklog.source_identity import LENT, fill, groups_of, lent_table, observe, resolve
from tests.agent.conftest import assert_exactly_once, finish, start_writer, wait_archived
from tests.agent.scripted_archive import scripted_archive
from tests.agent.test_config_discover import _cfg
from tests.helpers.agent_proc import parse_worker_pids, running_agent
from tests.helpers.procs import REPO

SCENARIOS = REPO / "tests" / "scenarios"


def _python_log_with_tracebacks(path: Path, records: int) -> None:
    """Python-logging text where every 7th record carries a traceback of 5–60 lines (they straddle reads)."""
    rng = random.Random(19)
    out = []
    for i in range(records):
        level = "ERROR" if i % 7 == 3 else "INFO"
        out.append(f"2026-12-02 12:{i // 600 % 60:02d}:{i // 10 % 60:02d},{i % 1000:03d} - trainer.rank{i % 4} - "
                   f"{level} - step {i} {'failed' if level == 'ERROR' else 'done'} loss {rng.random():.4f}\n")
        if level == "ERROR":
            out.append("Traceback (most recent call last):\n")
            for depth in range(rng.randint(2, 30)):
                out.append(f'  File "/opt/train/module_{depth}.py", line {rng.randint(1, 900)}, in f{depth}\n')
                out.append(f"    value = compute_{depth}(x)  # {'y' * rng.randint(0, 80)}\n")
            out.append(f"RuntimeError: CUDA error: an illegal memory access was encountered (step {i})\n")
        if i % 50 == 0:
            out.append("plain print without a timestamp\n\n")
    path.write_text("".join(out))


def _ranklog_jsonl(path: Path, records: int) -> None:
    lines = [f'{{"ts":"2026-12-02T12:00:{i % 60:02d}.{i:06d}Z","level":"INFO","msg":"record {i}","rank":1,'
             f'"job":"j","seq":{i}}}\n' if i % 13 else f"not json at all {i}\n" for i in range(records)]
    path.write_text("".join(lines))


def _corpus(root: Path) -> Path:
    """Real Ray and torchrun output (as the tools wrote it) plus generated multi-line Python and JSON logs."""
    corpus = root / "corpus"
    shutil.copytree(SCENARIOS / "ray_task_exception_text" / "out", corpus / "ray", copy_function=shutil.copy2)
    shutil.copytree(SCENARIOS / "torchrun_exception" / "out", corpus / "torchrun", copy_function=shutil.copy2)
    (corpus / "app").mkdir()
    _python_log_with_tracebacks(corpus / "app" / "train.log", 1500)
    _ranklog_jsonl(corpus / "app" / "rank-1.pid-7.0.jsonl", 3000)
    return corpus


LOG_METRICS = ("ranklog_log_records_total", "ranklog_failure_signatures_total", "ranklog_training_step",
               "ranklog_last_record_timestamp_seconds", "ranklog_agent_parse_errors_total")


def _ship(corpus: Path, workdir: Path, token_file: Path, workers: int) -> tuple[pa.Table, float, dict]:
    """Every record the agent ships of `corpus` with `workers` parse workers, its worker-busy seconds, and
    the metrics it read from the logs."""
    with scripted_archive() as archive, running_agent(
            [archive.url], token_file, workdir / "state",
            sources=[f"{corpus}/ray/**/*", f"{corpus}/torchrun/**/*", f"{corpus}/app/*.log:python",
                     f"{corpus}/app/*.jsonl:ranklog"],
            extra_args=["--host", "node1", "--parse-workers", str(workers), "--read-chunk", "4KB",
                        "--idle-final", "200ms"]) as agent:
        scrape = agent.wait_idle(timeout=120)
        assert scrape.value("ranklog_agent_parse_workers") == workers
        busy = scrape.value("ranklog_agent_parse_worker_busy_seconds_total")
        from_logs = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in scrape.samples
                     if s.name in LOG_METRICS}
    table = pa.concat_tables(archive.tables)
    return table.sort_by([("source_id", "ascending"), ("offset", "ascending")]), busy, from_logs


def test_records_are_identical_with_one_and_three_parse_workers(tmp_path: Path, token_file: Path) -> None:
    corpus = _corpus(tmp_path)
    inline, inline_busy, inline_metrics = _ship(corpus, tmp_path / "one", token_file, 1)
    pooled, pooled_busy, pooled_metrics = _ship(corpus, tmp_path / "three", token_file, 3)
    assert inline.num_rows > 4000 and inline_busy > 0 and pooled_busy > 0
    # 4 KB reads cut tracebacks (up to ~60 lines) and Ray's actor-name state across pieces
    tracebacks = [exc for exc in inline.column("exc").to_pylist() if exc and exc.count("\n") > 20]
    assert tracebacks, "the corpus should hold tracebacks longer than one read"
    assert set(inline.column("format").to_pylist()) >= {"python", "ranklog", "text", "torchrun"}
    # What the node's files lend each other (ranklog.agent.node_identity) reaches a file's records from
    # the moment the agent learns it, which depends on when each file was read: those columns agree
    # once joined as every reader joins them (ranklog.source_identity), the rest as shipped.
    joined_inline, joined_pooled = _joined(inline), _joined(pooled)
    for name in inline.column_names:
        if name in LENT:
            assert joined_inline.column(name).to_pylist() == joined_pooled.column(name).to_pylist(), name
        else:
            assert inline.column(name).to_pylist() == pooled.column(name).to_pylist(), f"column {name} differs"
    # the workers' metric summaries add up to what the reading thread's own observation gives (the rank
    # label, as the records' rank, from when the agent knew it)
    assert any(name == "ranklog_failure_signatures_total" for name, _ in inline_metrics)
    assert _without_rank(inline_metrics) == _without_rank(pooled_metrics)


def _joined(table: pa.Table) -> pa.Table:
    return fill(table, lent_table(resolve(groups_of(observe(table)))))


def _without_rank(metrics: dict) -> dict:
    """The metrics with the rank label dropped: counters added up, gauges at their highest."""
    out: dict = {}
    for (name, labels), value in metrics.items():
        key = (name, tuple(item for item in labels if item[0] != "rank"))
        if key in out:
            out[key] = out[key] + value if name.endswith("_total") else max(out[key], value)
        else:
            out[key] = value
    return out


@pytest.mark.slow
def test_killed_parse_workers_are_replaced_and_nothing_is_lost_or_doubled(tmp_path: Path, token_file: Path,
                                                                           archive) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    lines = 60_000
    writer = start_writer(logs / "rank-0.pid-1.0.jsonl", "--lines", str(lines), "--rate", "10000", log_dir=tmp_path)
    with running_agent([archive.url], token_file, tmp_path / "state", sources=[f"{logs}/*.jsonl:ranklog"],
                       extra_args=["--parse-workers", "2", "--read-chunk", "64KB"]) as agent:
        agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") > 1000, timeout=60)
        killed = 0
        for _ in range(3):
            workers = parse_worker_pids(agent.proc.pid)
            assert len(workers) == 2, workers
            os.kill(random.choice(workers), signal.SIGKILL)
            killed += 1
            time.sleep(1.0)
        finish(writer)
        scrape = agent.wait_idle(timeout=120)
        assert scrape.value("ranklog_agent_parse_worker_restarts_total") == killed
        assert len(parse_worker_pids(agent.proc.pid)) == 2
        assert "parse worker" in agent.log() and "died" in agent.log()
    table = wait_archived(archive.root, lines)
    assert_exactly_once(table, set(range(lines)))


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_a_bad_parse_workers_value_fails_naming_the_key(tmp_path: Path, value: str) -> None:
    with pytest.raises((ConfigError, ValueError), match="parse_workers"):
        _cfg(tmp_path, "--source", "/x/*.log", "--parse-workers", value).validate()


def test_parse_workers_default_follows_the_allowed_cpus(tmp_path: Path, monkeypatch) -> None:
    assert _cfg(tmp_path, "--source", "/x/*.log").parse_workers == default_parse_workers()
    assert default_parse_workers() == max(1, min(allowed_cpus() - 1, 4))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5, 6, 7})
    group = Path("/proc/self/cgroup").read_text().splitlines()[-1].split(":", 2)[2].lstrip("/")
    limited = tmp_path / "cg" / group
    limited.mkdir(parents=True)
    (limited / "cpu.max").write_text("150000 100000\n")  # CPUQuota=150%
    assert allowed_cpus(str(tmp_path / "cg")) == 2
    (limited / "cpu.max").write_text("max 100000\n")
    assert allowed_cpus(str(tmp_path / "cg")) == 8


def test_a_worker_that_keeps_dying_stops_the_agent_loudly() -> None:
    import queue

    import prometheus_client

    from ranklog.agent.parse_pool import ParsePool, WorkerDied
    from ranklog.metrics import create

    events: queue.SimpleQueue = queue.SimpleQueue()
    metrics = create("agent", prometheus_client.CollectorRegistry())
    pool = ParsePool(1, metrics, events.put, max_restarts=2)
    try:
        with pytest.raises(RuntimeError, match="parse worker 0 died 3 times"):
            for _ in range(3):
                pool._workers[0].proc.kill()
                event = events.get(timeout=30)
                assert isinstance(event, WorkerDied)
                pool.died(event)
        assert metrics.agent_parse_worker_restarts._value.get() == 3
    finally:
        pool.close()


def test_the_last_record_of_a_quiet_file_is_not_held_for_another_idle_final(tmp_path: Path) -> None:
    """A file the agent reads late (it was written and went quiet long before) gets its last pending
    record flushed once read, not ``idle_final`` after the agent's own last read; a file that just
    grew still waits."""
    from ranklog.agent.tracked_file import TrackedFile

    path = tmp_path / "train.log"
    # (nine lines: a new source's first eight are what its layout is learned from, a read of fewer waits)
    path.write_text("".join(f"2026-12-02 12:00:0{i},000 - t - INFO - step {i}\n" for i in range(9)))
    results = {}
    for quiet in (True, False):
        tf = TrackedFile(path=str(path), fd=os.open(path, os.O_RDONLY), format="python", fields={}, options={})
        try:
            assert tf.identify("node1", "127.0.0.1")
            tf.note_size(path.stat().st_size, time.time())
            if quiet:
                tf.grew_at -= 5.0  # seen at this size 5 s ago
            now = time.monotonic()
            first = tf.read_step(1 << 20, idle_final=0.5, now=now)
            assert first.chunk.rows == 8  # the last line may still be continued
            second = tf.read_step(1 << 20, idle_final=0.5, now=now + 0.01)
            results[quiet] = second.chunk.rows if second.chunk is not None else 0
        finally:
            tf.close()
    assert results == {True: 1, False: 0}


def test_a_file_written_before_it_was_seen_has_its_last_record_flushed_at_its_end(tmp_path: Path) -> None:
    """Renamed in (or found at start) after its writer finished: its own mtime says it is quiet, so the
    last record goes as soon as the file is read to its end; an mtime in the future (a skewed clock)
    does not count as quiet."""
    from ranklog.agent.tracked_file import TrackedFile

    path = tmp_path / "train.log"
    # (nine lines: a new source's first eight are what its layout is learned from, a read of fewer waits)
    path.write_text("".join(f"2026-12-02 12:00:0{i},000 - t - INFO - step {i}\n" for i in range(9)))
    results = {}
    for age in (10.0, -10.0):  # mtime 10 s ago / 10 s in the future
        stamp = time.time() - age
        os.utime(path, (stamp, stamp))
        tf = TrackedFile(path=str(path), fd=os.open(path, os.O_RDONLY), format="python", fields={}, options={})
        try:
            assert tf.identify("node1", "127.0.0.1")
            now = time.monotonic()  # seen growing just now: the agent's own view says "wait"
            tf.grew_at = now
            assert tf.read_step(1 << 20, idle_final=0.5, now=now).chunk.rows == 8
            second = tf.read_step(1 << 20, idle_final=0.5, now=now + 0.01)
            results[age] = second.chunk.rows if second.chunk is not None else 0
        finally:
            tf.close()
    assert results == {10.0: 1, -10.0: 0}


def test_a_file_moves_to_a_less_busy_worker_with_its_open_record(tmp_path: Path) -> None:
    """A file with no piece in its worker goes to a worker with fewer bytes to parse, carrying the rest
    its old worker kept (a traceback cut by the read); its records are those of one parse of the whole
    file."""
    import queue

    import prometheus_client

    from ranklog import parse
    from ranklog.agent.parse_pool import Parsed, ParsePool
    from ranklog.agent.tracked_file import TrackedFile
    from ranklog.metrics import create
    from ranklog.record import arrow_schema

    _python_log_with_tracebacks(tmp_path / "a.log", 400)
    _ranklog_jsonl(tmp_path / "b.jsonl", 3000)
    _ranklog_jsonl(tmp_path / "c.jsonl", 300)
    files = {}
    for name, fmt in (("a.log", "python"), ("b.jsonl", "ranklog"), ("c.jsonl", "ranklog")):
        path = tmp_path / name
        os.utime(path, (time.time() - 60, time.time() - 60))  # written long ago: its end is final
        files[name] = TrackedFile(path=str(path), fd=os.open(path, os.O_RDONLY), format=fmt, fields={}, options={})
        assert files[name].identify("node1", "127.0.0.1")
    events: queue.SimpleQueue = queue.SimpleQueue()
    metrics = create("agent", prometheus_client.CollectorRegistry())
    pool = ParsePool(2, metrics, events.put, depth=4)
    messages: dict[str, list[bytes]] = {name: [] for name in files}

    def feed(name: str, size: int) -> None:
        outcome = files[name].read_step(size, idle_final=0.5, now=time.monotonic(), parse_here=False)
        pool.send(files[name], outcome.raw, outcome.final)

    def answer() -> None:
        event = events.get(timeout=60)
        assert isinstance(event, Parsed), event
        tf, chunk, _ = pool.take(event)
        if chunk is not None and chunk.encoded:
            messages[Path(tf.path).name].append(chunk.encoded)

    try:
        feed("a.log", 3000)  # ends inside a record: its worker keeps the rest
        answer()
        home = pool._home[files["a.log"].uid]
        feed("c.jsonl", 2_000)  # a small piece to the other worker …
        feed("b.jsonl", 200_000)  # … and a big one to a.log's worker
        assert {pool._home[files["c.jsonl"].uid], pool._home[files["b.jsonl"].uid]} == {0, 1}
        assert pool._home[files["b.jsonl"].uid] == home
        feed("a.log", 1 << 20)  # the rest of a.log: its worker has the bigger queue
        assert pool._home[files["a.log"].uid] != home
        assert metrics.agent_parse_files_moved._value.get() == 1
        while not (pool.idle and files["a.log"].parse_offset == os.path.getsize(tmp_path / "a.log")):
            if pool.idle:
                feed("a.log", 1 << 20)  # the final flush of the last record
            answer()
    finally:
        pool.close()
        for tf in files.values():
            tf.close()
    schema = arrow_schema()
    from ranklog.agent.ship import assemble

    pooled = pa.ipc.open_stream(assemble(schema, messages["a.log"])).read_all()
    whole = (tmp_path / "a.log").read_bytes()
    ctx = parse.SourceContext(source=str(tmp_path / "a.log"), source_id=files["a.log"].ctx.source_id,
                              format="python", host="node1", ip="127.0.0.1")
    once = pa.Table.from_batches([parse.parse(whole, 0, ctx, final=True, read_time_ns=time.time_ns()).batch])
    assert pooled.num_rows == once.num_rows > 400
    for name in ("offset", "ts", "level", "msg", "exc", "source_id"):
        assert pooled.column(name).to_pylist() == once.column(name).to_pylist(), name


def test_small_reads_parse_in_the_reading_thread_and_hand_the_open_record_over_both_ways(tmp_path: Path) -> None:
    """With parse workers, a short read of a few lines (a trickle's) is parsed in the reading thread
    when none of the file is in a worker (the pool lends it); a bigger one goes to a worker. A
    Python log with tracebacks, read in pieces that end inside records and alternate between the
    two: the open record and the parser state move from worker to reading thread and back, and the
    records are those of one parse of the whole file — in order, none lost, none doubled."""
    import queue

    import prometheus_client

    from ranklog import parse
    from ranklog.agent.parse_pool import Parsed, ParsePool
    from ranklog.agent.runner import SMALL_READ
    from ranklog.agent.ship import assemble
    from ranklog.agent.tracked_file import TrackedFile
    from ranklog.metrics import create
    from ranklog.record import arrow_schema

    path = tmp_path / "a.log"
    _python_log_with_tracebacks(path, 2000)
    os.utime(path, (time.time() - 60, time.time() - 60))  # written long ago: its end is final
    tf = TrackedFile(path=str(path), fd=os.open(path, os.O_RDONLY), format="python", fields={}, options={})
    assert tf.identify("node1", "127.0.0.1")
    events: queue.SimpleQueue = queue.SimpleQueue()
    pool = ParsePool(2, create("agent", prometheus_client.CollectorRegistry()), events.put, piece_bytes=1 << 20)
    schema = arrow_schema()
    tables: list[pa.Table] = []
    where: list[str] = []
    sizes = itertools.cycle((3_001, 150_007, 5_003, 7_919, 90_001))  # small, big, small, small, big
    try:
        while True:
            outcome = tf.read_step(next(sizes), idle_final=0.5, now=time.monotonic(), parse_here=False)
            if outcome.raw is None:
                break
            if len(outcome.raw) < SMALL_READ and pool.lend(tf):
                chunk, _ = tf.parse_read(outcome.raw, outcome.final)
                pool.give_back(tf)
                where.append("here")
                if chunk is not None and chunk.rows:
                    tables.append(pa.Table.from_batches([chunk.batch]))
                continue
            pool.send(tf, outcome.raw, outcome.final)
            where.append("worker")
            while not pool.idle:
                event = events.get(timeout=60)
                assert isinstance(event, Parsed), event
                _, chunk, _ = pool.take(event)
                if chunk is not None and chunk.encoded:
                    tables.append(pa.ipc.open_stream(assemble(schema, [chunk.encoded])).read_all())
    finally:
        pool.close()
        tf.close()
    assert tf.parse_offset == tf.read_offset == path.stat().st_size
    assert where.count("here") >= 3 and where.count("worker") >= 3
    assert 3_001 < SMALL_READ < 90_001
    whole = path.read_bytes()
    ctx = parse.SourceContext(source=str(path), source_id=tf.ctx.source_id, format="python", host="node1",
                              ip="127.0.0.1")
    once = pa.Table.from_batches([parse.parse(whole, 0, ctx, final=True, read_time_ns=time.time_ns()).batch])
    pieces = pa.concat_tables(tables)
    assert pieces.num_rows == once.num_rows > 2000
    for name in ("offset", "ts", "level", "msg", "exc", "source_id"):
        assert pieces.column(name).to_pylist() == once.column(name).to_pylist(), name


def test_the_piece_arena_hands_bytes_over_in_slots_and_refuses_what_does_not_fit() -> None:
    """The agent's side writes a slot, the worker's side (its own mapping of the same memfd) reads it;
    a piece larger than a slot, or one with every slot taken, gets None (it goes through the pipe)."""
    from ranklog.agent.piece_arena import PieceArena

    agent_side, fd = PieceArena.create(2, 1024)
    worker_side = PieceArena.attach(os.dup(fd), 2, 1024)
    os.close(fd)
    try:
        first, second = agent_side.put(b"a" * 1024), agent_side.put(b"second piece")
        assert {first, second} == {0, 1}
        assert bytes(worker_side.view(second, len(b"second piece"))) == b"second piece"
        assert bytes(worker_side.view(first, 1024)) == b"a" * 1024
        assert agent_side.put(b"x") is None  # both slots are the worker's until it answers
        agent_side.release(first)
        assert agent_side.put(b"x" * 1025) is None  # larger than a slot
        assert agent_side.put(b"again") == first
        assert bytes(worker_side.view(first, 5)) == b"again"
    finally:
        agent_side.close()
        worker_side.close()


def test_without_memfd_the_raw_bytes_go_through_the_pipe(tmp_path: Path, monkeypatch) -> None:
    """Where memfd_create is missing or refused (an old kernel, a seccomp filter), a worker gets its
    pieces in the frames themselves and parses them all the same."""
    import queue

    import prometheus_client

    from ranklog.agent.parse_pool import Parsed, ParsePool
    from ranklog.agent.tracked_file import TrackedFile
    from ranklog.metrics import create

    def refused(*_args):
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "memfd_create", refused)
    path = tmp_path / "rank-1.jsonl"
    _ranklog_jsonl(path, 500)
    tf = TrackedFile(path=str(path), fd=os.open(path, os.O_RDONLY), format="ranklog", fields={}, options={})
    assert tf.identify("node1", "127.0.0.1")
    events: queue.SimpleQueue = queue.SimpleQueue()
    pool = ParsePool(1, create("agent", prometheus_client.CollectorRegistry()), events.put)
    try:
        assert pool._workers[0].arena is None
        outcome = tf.read_step(1 << 20, idle_final=0.5, now=time.monotonic(), parse_here=False)
        pool.send(tf, outcome.raw, True)
        event = events.get(timeout=60)
        assert isinstance(event, Parsed) and "slot" not in event.header
        _, chunk, _ = pool.take(event)
        assert chunk.rows == 500 and tf.parse_offset == path.stat().st_size
    finally:
        pool.close()
        tf.close()


def _start_order(pids: list[int]) -> list[int]:
    """`pids` in the order the processes started (the pool starts worker 0 first)."""
    def started(pid: int) -> tuple[int, int]:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]), pid
    return sorted(pids, key=started)


def _seq_lines(path: Path, first: int, count: int, rank: int) -> None:
    with path.open("a") as out:
        out.writelines(f'{{"ts":"2026-12-02T12:00:00.{i % 1_000_000:06d}Z","level":"INFO","msg":"record {i} '
                       f'{"x" * 120}","rank":{rank},"seq":{i}}}\n' for i in range(first, first + count))


def test_a_stalled_worker_does_not_take_the_budget_from_the_other_files(tmp_path: Path, token_file: Path) -> None:
    """Worker 0 stops (SIGSTOP: a worker far behind) while its file keeps growing: once half the
    in-flight budget is used, that file is read no further than one waiting piece, so the other file
    — parsed by worker 1 — is shipped in full meanwhile; without the rule the stalled file's reads
    fill the whole budget and reading stops for every file. Once the worker goes on, every record
    of both files arrives exactly once."""
    logs = tmp_path / "logs"
    logs.mkdir()
    stalled, other = logs / "a.jsonl", logs / "b.jsonl"
    _seq_lines(stalled, 0, 1_000, rank=0)  # ~170 KB: full reads, which go to a worker (a short one parses here)
    with scripted_archive() as archive, running_agent(
            [archive.url], token_file, tmp_path / "state", sources=[f"{logs}/*.jsonl:ranklog"],
            extra_args=["--parse-workers", "2", "--read-chunk", "64KB", "--max-unacked-bytes", "1MB"]) as agent:
        agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 1_000, timeout=60)
        scrape = agent.scrape()
        assert scrape.value("ranklog_agent_parse_worker_busy_seconds_total", worker="0") > 0
        assert scrape.value("ranklog_agent_parse_worker_busy_seconds_total", worker="1") == 0  # a.jsonl is worker 0's
        first_worker = _start_order(parse_worker_pids(agent.proc.pid))[0]
        os.kill(first_worker, signal.SIGSTOP)
        try:
            _seq_lines(stalled, 1_000, 30_000, rank=0)  # ~5 MB: five times the budget
            _seq_lines(other, 1_000_000, 20_000, rank=1)  # ~3 MB
            agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 1_000 + 20_000, timeout=60,
                           what="b.jsonl shipped while worker 0 is stopped")
            shipped = pa.concat_tables(archive.tables)
            assert set(shipped.column("rank").to_pylist()) <= {0, 1}
            assert shipped.filter(pc.equal(shipped["rank"], 1)).num_rows == 20_000
            assert agent.scrape().value("ranklog_agent_reading_paused") == 0  # a.jsonl keeps below the cap
        finally:
            os.kill(first_worker, signal.SIGCONT)
        agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 1_000 + 30_000 + 20_000, timeout=60)
    table = pa.concat_tables(archive.tables)
    assert_exactly_once(table, set(range(31_000)) | set(range(1_000_000, 1_020_000)))


def test_a_worker_answers_in_order_while_parsing_ahead_and_answers_what_it_parsed_before_an_error(
        tmp_path: Path) -> None:
    """A real worker process, fed through its pipe: the summary and the IPC message of a piece are made
    in its answering thread while the next piece is parsed, and the answers still come in the order of
    the pieces, each with its own rows, summary and parser state; a piece that cannot be parsed (bytes
    that do not follow the file's last ones) ends the worker with an error frame only after the
    pieces before it were answered, so the agent hands just the unanswered bytes to the next worker."""
    from ranklog.agent.parse_pool import _spawn
    from ranklog.agent.parse_worker import read_frame, write_frame

    path = tmp_path / "rank-0.jsonl"
    _seq_lines(path, 0, 3000, rank=0)
    data = path.read_bytes()
    cuts = [0, *(data.index(b"\n", size) + 1 for size in (60_000, 200_000, 300_000)), len(data)]
    ctx = {"source": str(path), "source_id": "s", "format": "ranklog", "host": "node1", "ip": "127.0.0.1",
           "fields": {}, "state": {}, "options": {}}
    worker = _spawn('{"compression": "lz4", "training_metrics": []}')
    try:
        for number, (start, end) in enumerate(itertools.pairwise(cuts)):
            header = {"op": "parse", "file": 7, "offset": start, "final": end == len(data), "path": str(path),
                      "mtime_ns": None, "read_time_ns": time.time_ns(), **({"ctx": ctx, "parse_offset": 0}
                                                                           if number == 0 else {})}
            write_frame(worker.stdin, header, data[start:end])
        write_frame(worker.stdin, {"op": "parse", "file": 7, "offset": 1, "final": True, "path": str(path),
                                   "mtime_ns": None, "read_time_ns": time.time_ns()}, b"{}\n")
        worker.stdin.close()
        answers = [read_frame(worker.stdout) for _ in range(len(cuts))]
        assert worker.wait(timeout=60) == 1
    finally:
        worker.kill()
        worker.wait()
    *parsed, (failure, _) = answers
    assert "do not follow" in failure["error"]
    assert [header["start"] for header, _ in parsed] == cuts[:-1]
    assert [header["consumed"] for header, _ in parsed] == [b - a for a, b in itertools.pairwise(cuts)]
    for header, _ in parsed:
        assert sum(count for *_, count, _ in header["summary"].records) == header["rows"] > 0
        assert header["busy"] > 0
    from ranklog.agent.ship import assemble
    from ranklog.record import arrow_schema

    table = pa.ipc.open_stream(assemble(arrow_schema(), [body for _, body in parsed])).read_all()
    assert table.column("seq").to_pylist() == list(range(3000))
    assert table.column("offset").to_pylist() == [0, *(i + 1 for i, byte in enumerate(data[:-1]) if byte == 10)]
