"""Many writers at once: 8 processes, and threads inside one process. No torn or interleaved lines."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers.log_files import PRELUDE, child_env, ranklog_files, read_records

RECORDS = 3000


@pytest.mark.slow
def test_eight_processes_write_concurrently_without_torn_lines(tmp_path):
    code = PRELUDE + f"""
rank = int(os.environ["RANK"])
for i in range({RECORDS}):
    # Mixed sizes, some well past a pipe buffer, so torn writes would show.
    log.info("r%d i%d %s", rank, i, "y" * (i % 7 * 1500), extra={{"step": i}})
"""
    procs = [subprocess.Popen([sys.executable, "-c", code], env=child_env(tmp_path, RANK=str(rank), RANKLOG_JOB="conc"))
             for rank in range(8)]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    files = ranklog_files(tmp_path)
    assert len(files) == 8
    ranks = set()
    for path in files:
        records = read_records(path)
        assert len(records) == RECORDS
        rank = records[0]["rank"]
        ranks.add(rank)
        assert path.name.startswith(f"rank-{rank}.pid-{records[0]['pid']}.")
        assert [r["seq"] for r in records] == list(range(1, RECORDS + 1))
        assert [r["step"] for r in records] == list(range(RECORDS))
        for r in records:
            assert r["rank"] == rank and r["msg"].startswith(f"r{rank} i{r['step']} ")
            assert len(r["msg"]) - len(f"r{rank} i{r['step']} ") == r["step"] % 7 * 1500
    assert ranks == set(range(8))


def test_threads_in_one_process_get_strictly_increasing_seq(tmp_path):
    code = PRELUDE + """
import threading
def work(t):
    for i in range(5000):
        log.info("t%d %d", t, i)
threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
"""
    subprocess.run([sys.executable, "-c", code], env=child_env(tmp_path), check=True, timeout=120)
    (path,) = ranklog_files(tmp_path)
    records = read_records(path)
    assert [r["seq"] for r in records] == list(range(1, 20001))
    per_thread: dict[str, list[int]] = {}
    for r in records:
        thread, i = r["msg"].split()
        per_thread.setdefault(thread, []).append(int(i))
    assert all(values == list(range(5000)) for values in per_thread.values()) and len(per_thread) == 4
