"""The `python` parser: every logging layout, glog, tracebacks joined to the record they follow."""

from __future__ import annotations

import json

import pytest

from tests.parse.conftest import READ_TIME_STORED, make_ctx, parse_whole, rows

T = 1_796_216_645_123_000_000  # 2026-12-02 13:04:05.123 UTC


@pytest.mark.parametrize(("line", "ts", "level", "logger", "msg"), [
    ("2026-12-02 13:04:05,123 - trainer - WARNING - lr is high", T, "WARNING", "trainer", "lr is high"),
    ("[2026-12-02 13:04:05,123][hydra.core][INFO] - config loaded", T, "INFO", "hydra.core", "config loaded"),
    ("2026-12-02 13:04:05,123 ERROR torch.distributed: barrier failed", T, "ERROR", "torch.distributed", "barrier failed"),
    ("2026-12-02 13:04:05.123 | SUCCESS  | __main__:main:42 - done", T, "UNKNOWN", "__main__", "done"),
    ("2026-12-02 13:04:05,123\tINFO worker.py:221 -- Connecting to Ray", T, "INFO", None, "Connecting to Ray"),
    ("2026-12-02T13:04:05.123Z INFO something happened", T, "INFO", None, "something happened"),
    ("2026-12-02 13:04:05,123 [ERROR] bracketed", T, "ERROR", None, "bracketed"),
    ("INFO:root:basic config default", READ_TIME_STORED, "INFO", "root", "basic config default"),
    ("CRITICAL:my.module:it broke", READ_TIME_STORED, "CRITICAL", "my.module", "it broke"),
    ("W1202 13:04:05.123000 10004 torch/distributed/run.py:874] Setting OMP_NUM_THREADS", T, "WARNING", None,
     "Setting OMP_NUM_THREADS"),
    ("[E1202 13:04:05.123000 4242 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout",
     T, "ERROR", None, "[Rank 3] Watchdog caught collective operation timeout"),
])
def test_layouts(line, ts, level, logger, msg):
    (row,) = rows(parse_whole((line + "\n").encode(), make_ctx("python"))[0])
    assert (row["ts"], row["level"], row["logger"], row["msg"]) == (ts, level, logger, msg)
    assert row["format"] == "python"


def test_glog_year_comes_from_the_read_time_and_pid_file_are_kept():
    (row,) = rows(parse_whole(b"I1202 13:04:05.123456 77 file.cc:42] hi\n", make_ctx("python"))[0])
    assert row["ts"] == 1_796_216_645_123_456_000 and row["pid"] == 77
    assert json.loads(row["attrs"]) == {"file": "file.cc:42", "tz_assumed": "UTC"}


def test_unrecognised_lines_are_whole_messages_with_a_guessed_level():
    data = b"loading shards 3/8\nERROR: cannot open file\nUserWarning: deprecated\nValueError: x\n"
    got = rows(parse_whole(data, make_ctx("python"))[0])
    assert [r["msg"] for r in got] == ["loading shards 3/8", "ERROR: cannot open file", "UserWarning: deprecated",
                                       "ValueError: x"]
    assert [r["level"] for r in got] == ["UNKNOWN", "ERROR", "WARNING", "ERROR"]
    assert {r["ts"] for r in got} == {READ_TIME_STORED}


def test_logger_exception_traceback_joins_its_record():
    data = (b"2026-12-02 13:04:05,123 - train - ERROR - step failed\n"
            b"Traceback (most recent call last):\n"
            b'  File "/w/train.py", line 10, in <module>\n'
            b"    main()\n"
            b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
            b"2026-12-02 13:04:06,000 - train - INFO - next\n")
    first, second = rows(parse_whole(data, make_ctx("python"))[0])
    assert first["msg"] == "step failed" and first["level"] == "ERROR"
    assert first["exc"].startswith("Traceback (most recent call last):\n  File")
    assert first["exc"].endswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
    assert second["msg"] == "next" and second["offset"] == data.index(b"2026-12-02 13:04:06")


def test_uncaught_traceback_after_an_info_line_is_its_own_error_record():
    data = (b"2026-12-02 13:04:05,123 - train - INFO - step 3\n"
            b"Traceback (most recent call last):\n"
            b'  File "/w/train.py", line 10, in <module>\n'
            b"RuntimeError: CUDA error: an illegal memory access was encountered\n")
    info, crash = rows(parse_whole(data, make_ctx("python"))[0])
    assert info["exc"] is None
    assert crash["level"] == "ERROR" and crash["msg"] == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert crash["exc"].count("\n") == 2 and crash["offset"] == data.index(b"Traceback")


def test_chained_exceptions_stay_one_record_and_trailing_blank_lines_are_not_part_of_it():
    data = (b"Traceback (most recent call last):\n  File \"a.py\", line 1\nKeyError: 'x'\n\n"
            b"During handling of the above exception, another exception occurred:\n\n"
            b"Traceback (most recent call last):\n  File \"a.py\", line 3\nValueError: bad\n\n\n"
            b"after\n")
    crash, after = rows(parse_whole(data, make_ctx("python"))[0])
    assert crash["msg"] == "ValueError: bad"
    assert "KeyError: 'x'\n\nDuring handling" in crash["exc"] and crash["exc"].endswith("ValueError: bad")
    assert after["msg"] == "after"


def test_indented_continuation_joins_the_message():
    data = b"2026-12-02 13:04:05,123 - cfg - INFO - config:\n  lr: 0.1\n  batch: 8\nplain\n"
    cfg, plain = rows(parse_whole(data, make_ctx("python"))[0])
    assert cfg["msg"] == "config:\n  lr: 0.1\n  batch: 8" and cfg["exc"] is None
    assert plain["msg"] == "plain"


def test_rank_prefix_gives_the_rank():
    data = b"[rank3]:[E1202 13:04:05.123000 4242 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout\n"
    (row,) = rows(parse_whole(data, make_ctx("python", fields={"rank": 0}))[0])
    assert row["rank"] == 3 and row["pid"] == 4242 and row["level"] == "ERROR"
    assert row["msg"].startswith("[Rank 3] Watchdog")


def test_naive_times_use_the_timezone_option():
    data = b"2026-12-02 14:04:05,123 - t - INFO - x\n"
    (row,) = rows(parse_whole(data, make_ctx("python", options={"timezone": "Europe/Berlin"}))[0])
    assert row["ts"] == T
