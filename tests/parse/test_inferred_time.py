"""Lines without a timestamp take the time of the file's nearest timestamped line, or its mtime — never the read time."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ranklog.parse import parse
from ranklog.parse.directory import read_log_dir
from tests.parse.conftest import READ_TIME_NS, make_ctx, parse_whole, rows

T1 = 1_796_216_645_000_000_000  # 2026-12-02T13:04:05Z
T2 = T1 + 2_000_000_000


def _reasons(got):
    return [json.loads(r["attrs"]).get("ts_inferred") if r["attrs"] else None for r in got]


def test_a_line_takes_the_previous_timestamped_line_and_the_head_takes_the_next():
    data = (b"printed before any log line\n"
            b"2026-12-02 13:04:05,000 INFO train: step 1\n"
            b"hello from print\n"
            b"2026-12-02 13:04:07,000 WARNING train: slow\n"
            b"done\n")
    got = rows(parse_whole(data, make_ctx("python"))[0])
    assert [r["ts"] for r in got] == [T1, T1, T1, T2, T2]
    assert _reasons(got) == ["next", None, "previous", None, "previous"]


def test_the_previous_time_carries_across_reads_of_the_same_file():
    ctx = make_ctx("python")
    first = parse(b"2026-12-02 13:04:05,000 INFO train: step 1\n", 0, ctx, final=True, read_time_ns=READ_TIME_NS)
    assert rows(first.batch)[0]["ts"] == T1
    second = parse(b"a print much later\n", first.consumed, ctx, final=True, read_time_ns=READ_TIME_NS + 10**12)
    (row,) = rows(second.batch)
    assert row["ts"] == T1 and _reasons([row]) == ["previous"]


def test_a_file_without_timestamps_takes_its_modification_time(tmp_path: Path):
    path = tmp_path / "console.log"
    path.write_text("step:1 - actor/pg_loss:np.float64(0.5)\nstep:2 - actor/pg_loss:np.float64(0.4)\n")
    mtime_ns = 1_700_000_000_123_456_000
    os.utime(path, ns=(mtime_ns, mtime_ns))
    got = read_log_dir(str(tmp_path)).to_pylist()
    assert len(got) == 2
    assert {r["ts"].timestamp() for r in got} == {mtime_ns / 1e9}
    assert _reasons(got) == ["mtime", "mtime"]
