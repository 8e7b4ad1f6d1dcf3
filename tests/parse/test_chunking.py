"""Feeding a file in arbitrary chunks gives exactly the records (and offsets, and state) of one feed."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ranklog.parse import FORMATS
from tests.helpers.layouts import RAY_OOM_KILL, nccl_watchdog, ranklog_line, traceback_lines, verl_step_line
from tests.parse.conftest import feed_chunks, make_ctx, parse_whole

T = datetime(2026, 12, 2, 13, 4, 5, tzinfo=timezone.utc)
TB = "\n".join(traceback_lines("ValueError: bad")).encode()
CHAINED = TB + b"\n\nDuring handling of the above exception, another exception occurred:\n\n" + TB

PYTHON_TEXT = b"\n".join([
    b"2026-12-02 13:04:05,123 - train - INFO - " + verl_step_line(1).encode(),
    b"2026-12-02 13:04:05,124 - train - ERROR - failed", TB,
    b"", b"plain \xff\xfe line", b"\x1b[32mgreen\x1b[0m",
    b"2026-12-02 13:04:05,125 - cfg - INFO - config:", b"  lr: 0.1", b"  bs: 8",
    CHAINED, b"", b"", b"INFO:root:basic",
    b"[rank3]:[E1202 13:04:05.123456 1234 ProcessGroupNCCL.cpp:616] " + nccl_watchdog(3).encode(),
    b"[rank3]: Traceback (most recent call last):", b'[rank3]:   File "x.py", line 2', b"[rank3]: RuntimeError: boom",
    b"tail line\r", b"last line without newline",
])

CORPUS: dict[str, bytes] = {
    "ranklog": b"\n".join([
        ranklog_line(T, "INFO", f"step {i}", host="n1", ip="10.0.0.1", pid=7, rank=1, local_rank=1, job="j", seq=i,
                     loss=i / 3).encode() for i in range(30)
    ] + [b"garbage line", b"", b'{"msg": "cr"}\r', b'{"msg": 5, "rank": "x"}', b'{"msg": "\xff bad utf8"}',
         b'{"msg": "no newline at end"}']),
    "json": b"\n".join([
        json.dumps({"asctime": "2025-02-12 12:25:48,766", "levelname": "INFO", "message": f"m{i}", "job_id": "01000000",
                    "actor_name": "WorkerDict_0:1", "timestamp_ns": 1739391948766493000 + i}).encode() for i in range(20)
    ] + [b"not json", b'{"event": "structlog", "level": "warning"}']),
    "python": PYTHON_TEXT,
    "text": PYTHON_TEXT,
    "ranklog-text": b"\n".join([
        b"2026-12-02T13:04:05.123456Z INFO train [rank=3 step=1 loss=0.5] hello",
        b"2026-12-02T13:04:05.123457Z ERROR train [rank=3] failed", TB, b"print line",
    ]),
    "ray": b"\n".join([
        # (a file's head without any time takes the first time after it *in the same piece*: start timed)
        b'{"asctime": "2025-02-12 12:25:48,765", "levelname": "INFO", "message": "first"}',
        b":job_id:01000000", b":actor_name:WorkerDict_0:3", b"step 0",
        b'{"asctime": "2025-02-12 12:25:48,766", "levelname": "INFO", "message": "json line"}',
        # a driver's traceback with forwarded JSON lines printed into it, in its frames and in its message
        b"Traceback (most recent call last):", b'  File "driver.py", line 36, in <module>',
        b'{"asctime": "2025-02-12 12:25:48,767", "levelname": "INFO", "message": "[Rank 3] into frames"}',
        b"    ray.get(refs)", b"ray.exceptions.RayTaskError(RuntimeError): ray::W.f() (pid=3, ip=10.0.0.3)",
        b'{"asctime": "2025-02-12 12:25:48,768", "levelname": "INFO", "message": "[Rank 2] into message"}',
        b'  File "driver.py", line 29, in f', b"RuntimeError: boom", b"after the traceback",
        b"(WorkerDict pid=1, ip=10.0.0.1) Traceback (most recent call last):",
        b"(WorkerDict pid=2, ip=10.0.0.2) hello from 2",
        b'(WorkerDict pid=1, ip=10.0.0.1)   File "w.py", line 3',
        b"(WorkerDict pid=1, ip=10.0.0.1) ray.exceptions.ActorDiedError: The actor died unexpectedly",
        b"[2026-12-02 13:00:06,250 E 4100 4101] (raylet) node_manager.cc:3069: " + RAY_OOM_KILL.encode(),
        b":task_name:compute", b"(TaskRunner pid=9) " + verl_step_line(4).encode(),
    ]) + b"\n",
    "torchrun": b"\n".join(
        [f"[default{r}]:{line}".encode() for line in traceback_lines("ValueError: x").__iter__() for r in (0, 1)]
        + [b"[default0]:2026-12-02 13:04:05,123 - t - INFO - ok", b"[default1]:", b"plain"]) + b"\n",
    "verl-console": b"\n".join(f"(TaskRunner pid=9) {verl_step_line(i)}".encode() for i in range(10)) + b"\n",
    "verl-jsonl": b"\n".join(b'{"step": %d, "data": {"a": %d, "loss": NaN}}' % (i, i) for i in range(10)) + b"\n",
    "torchrun-error": json.dumps({"message": {"message": "RuntimeError: x", "extraInfo": {
        "py_callstack": TB.decode(), "timestamp": "1796224695"}}}).encode() + b"\n",
}


def test_every_format_has_a_corpus():
    assert set(CORPUS) == set(FORMATS)


@pytest.mark.parametrize("fmt", sorted(CORPUS))
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(min_value=1, max_value=300), min_size=1, max_size=40))
def test_chunked_feeding_equals_one_feed(fmt, sizes):
    data = CORPUS[fmt]
    whole_ctx = make_ctx(fmt, fields={"job": "layout-job", "attempt": 2})
    whole, whole_errors = parse_whole(data, whole_ctx)
    chunk_ctx = make_ctx(fmt, fields={"job": "layout-job", "attempt": 2})
    chunked, chunk_errors = feed_chunks(data, chunk_ctx, sizes)
    assert chunked.equals(whole)
    assert chunk_errors == whole_errors
    assert chunk_ctx.state == whole_ctx.state


@pytest.mark.parametrize("fmt", sorted(CORPUS))
def test_byte_by_byte_feeding_equals_one_feed(fmt):
    data = CORPUS[fmt][:250]
    whole, _ = parse_whole(data, make_ctx(fmt))
    chunked, _ = feed_chunks(data, make_ctx(fmt), [1] * len(data))
    assert chunked.equals(whole)
    offsets = whole.column("offset").to_pylist()
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
