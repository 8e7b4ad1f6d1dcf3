"""Line policy of captured output: levels, tracebacks, carriage returns, colours, huge lines."""

from __future__ import annotations

import pytest

from ranklog.log.capture import StreamCapture, detect_level


@pytest.mark.parametrize(("line", "level"), [
    ("ERROR:root:boom", 40),
    ("WARNING:torch.distributed:slow", 30),
    ("INFO:__main__:step 1", 20),
    ("[WARNING] disk almost full", 30),
    ("2026-12-02 13:04:05,123 [ERROR] trainer: bad", 40),
    ("2026-12-02 13:04:05,123 - trainer - ERROR - bad", 40),
    ("2026-12-02 13:04:05.123 | CRITICAL | mod:fn:12 - dead", 50),
    ("2026-12-02T13:04:05Z INFO ready", 20),
    ("E1202 13:04:05.123456  1234 socket.cc:42] NCCL WARN", 40),
    ("W1202 13:04:05.123456  1234 x.cc:1] careful", 30),
    ("F1202 13:04:05.123456  1234 x.cc:1] Check failed", 50),
    ("WARNING something happened", 30),
    ("plain text line", None),
    ("Error: lower-case prose is not a prefix", None),
    ("the ERROR word later in a line", None),
])
def test_level_prefixes(line, level):
    assert detect_level(line) == level


def _records(data: bytes, default: int = 30):
    capture = StreamCapture(default)
    return capture.feed(data) + capture.close()


def test_unprefixed_lines_take_the_stream_default():
    assert [r.levelno for r in _records(b"a\nb\n", default=20)] == [20, 20]
    assert [r.levelno for r in _records(b"a\nINFO:x:b\n", default=30)] == [30, 20]


def test_traceback_becomes_one_error_record():
    data = (b"step 9\nTraceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
            b"    main()\n  File \"train.py\", line 2, in main\n    raise ValueError('x')\nValueError: x\n")
    capture = StreamCapture(30, idle_seconds=0.0)
    step, crash = capture.feed(data) + capture.idle()
    (after,) = capture.feed(b"next line\n") + capture.close()
    assert step.msg == "step 9" and after.msg == "next line"
    assert crash.levelno == 40 and crash.msg == "ValueError: x"
    assert crash.exc.splitlines()[0] == "Traceback (most recent call last):" and crash.exc.endswith("ValueError: x")
    assert crash.exc.count("\n") == 5


def test_chained_exceptions_and_multiline_messages_stay_together():
    data = (b"Traceback (most recent call last):\n  File \"a.py\", line 1, in f\nKeyError: 'k'\n\n"
            b"During handling of the above exception, another exception occurred:\n\n"
            b"Traceback (most recent call last):\n  File \"a.py\", line 3, in g\n"
            b"RuntimeError: CUDA error: device-side assert triggered\n"
            b"CUDA kernel errors might be asynchronously reported at some other API call.\n"
            b"For debugging consider passing CUDA_LAUNCH_BLOCKING=1.\n"
            b"INFO:x:recovered\n")
    crash, info = _records(data)
    assert crash.msg == "RuntimeError: CUDA error: device-side assert triggered"
    assert "KeyError: 'k'" in crash.exc and "During handling" in crash.exc and "CUDA_LAUNCH_BLOCKING" in crash.exc
    assert info.levelno == 20 and info.exc is None


def test_logging_exception_output_attaches_traceback_to_its_record():
    data = b"ERROR:root:step failed\nTraceback (most recent call last):\n  File \"t.py\", line 1\nOSError: gone\n"
    (record,) = _records(data)
    assert record.msg == "ERROR:root:step failed" and record.levelno == 40 and record.exc.endswith("OSError: gone")


def test_crash_after_an_info_line_is_not_filed_under_info():
    data = b"INFO:root:step 5\nTraceback (most recent call last):\n  File \"t.py\", line 1\nOSError: gone\n"
    info, crash = _records(data)
    assert info.exc is None and crash.levelno == 40 and crash.msg == "OSError: gone"


def test_traceback_split_across_reads_and_closed_by_idle():
    capture = StreamCapture(30, idle_seconds=0.0)
    out = capture.feed(b"Traceback (most recent call last):\n  File \"a\", li")
    out += capture.feed(b"ne 1\nZeroDivisionError: division by zero\n")
    assert out == []  # waits: more lines may belong to it
    (record,) = capture.idle()
    assert record.msg == "ZeroDivisionError: division by zero" and '  File "a", line 1' in record.exc


def test_carriage_returns_colours_prefixes_and_blank_lines():
    data = (b"\r 10%|#   |\r 50%|##  |\r100%|####|\n\n   \n\x1b[31mERROR\x1b[0m: red\n"
            b"(WorkerDict pid=123, ip=10.0.0.1) [rank3]: WARNING: ray worker\r\n")
    bar, red, ray = _records(data, default=20)
    assert bar.msg == "100%|####|" and bar.levelno == 20
    assert red.msg == "ERROR: red" and red.levelno == 40
    assert ray.msg == "WARNING: ray worker" and ray.levelno == 30


def test_binary_garbage_and_huge_lines_are_bounded():
    capture = StreamCapture(20, max_line_bytes=1024)
    records = capture.feed(b"\xff\xfe\x00bin\x80\n")
    for _ in range(50):
        records += capture.feed(b"x" * 100_000)
    records += capture.feed(b"\nok\n") + capture.close()
    garbage, huge, ok = records
    assert garbage.msg == "\ufffd\ufffd\x00bin\ufffd"
    assert len(huge.msg) == 1024 and huge.truncated == 5_000_000
    assert ok.msg == "ok" and ok.truncated is None


def test_unterminated_last_line_is_kept():
    (record,) = _records(b"no newline at the end")
    assert record.msg == "no newline at the end"
