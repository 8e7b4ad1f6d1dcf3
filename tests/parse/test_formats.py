"""Ray, torchrun, verl and text parsers on the lines those tools really write."""

from __future__ import annotations

import json

import pytest

from ranklog.errors import ConfigError
from ranklog.parse import parse
from ranklog.parse.formats.ray import FORWARDED_BATCH
from tests.helpers.layouts import RAY_OOM_KILL, nccl_watchdog, verl_step_line
from tests.parse.conftest import READ_TIME_NS, make_ctx, parse_whole, rows


def test_ray_markers_set_role_and_job_and_survive_a_restart_through_state():
    ctx = make_ctx("ray", fields={"pid": 41230, "job": "01000000"})
    first = parse(b":job_id:02000000\n:actor_name:WorkerDict_0:3\nstep 0\n", 0, ctx, final=False,
                  read_time_ns=READ_TIME_NS)
    assert {k: ctx.state[k] for k in ("role", "job")} == {"role": "WorkerDict_0:3", "job": "02000000"}
    restarted = make_ctx("ray", fields={"pid": 41230, "job": "01000000"})
    restarted.state = json.loads(json.dumps(ctx.state))  # persisted with the checkpoint as JSON
    assert first.consumed == len(b":job_id:02000000\n:actor_name:WorkerDict_0:3\n")  # "step 0" may continue
    second = parse(b"step 0\nstep 1\n", first.consumed, restarted, final=True, read_time_ns=READ_TIME_NS)
    got = rows(first.batch) + rows(second.batch)
    # the marker line before the actor's name is the same process's (ranklog.parse.identity_stage)
    assert [r["role"] for r in got] == ["WorkerDict_0:3"] * 4
    assert [r["job"] for r in got] == ["02000000"] * 4
    assert got[0]["msg"] == ":job_id:02000000"  # marker lines are kept as records


def test_ray_driver_prefixes_give_role_pid_and_ip():
    data = (b"(WorkerDict pid=41230, ip=10.0.0.4) step 3 loss 0.5\n"
            b"(pid=77) plain task output\n"
            b"(raylet) not a worker prefix\n")
    got = rows(parse_whole(data, make_ctx("ray"))[0])
    assert [(r["role"], r["pid"], r["ip"], r["msg"]) for r in got] == [
        ("WorkerDict", 41230, "10.0.0.4", "step 3 loss 0.5"), (None, 77, "10.0.0.1", "plain task output"),
        (None, None, "10.0.0.1", "(raylet) not a worker prefix")]


def test_ray_cpp_layout_and_oom_killer_continuation():
    first, *rest = RAY_OOM_KILL.splitlines()
    data = (f"[2026-12-02 13:00:06,250 E 4100 4101] (raylet) node_manager.cc:3069: {first}\n"
            + "".join(f"  {line}\n" for line in rest)).encode()
    (row,) = rows(parse_whole(data, make_ctx("ray"))[0])
    assert row["level"] == "ERROR" and row["pid"] == 4100 and row["ts"] == 1_796_216_406_250_000_000
    assert row["msg"].startswith("Task was killed due to the node running low on memory.\n  Memory on the node")
    assert json.loads(row["attrs"]) == {"tid": "4101", "component": "raylet", "file": "node_manager.cc:3069",
                                        "tz_assumed": "UTC"}


def test_ray_file_mixing_json_and_text_lines():
    data = (b":actor_name:WorkerDict_0:1\n"
            b'{"asctime": "2025-02-12 12:25:48,766", "levelname": "ERROR", "message": "rollout failed", "job_id": "01000000"}\n'
            b"plain print\n"
            b'{"levelname": "INFO", "message": "again"}\n')
    got = rows(parse_whole(data, make_ctx("ray"))[0])
    assert [r["msg"] for r in got] == [":actor_name:WorkerDict_0:1", "rollout failed", "plain print", "again"]
    assert [r["role"] for r in got] == ["WorkerDict_0:1"] * 4
    assert [r["offset"] for r in got] == [0, data.index(b'{"asc'), data.index(b"plain"), data.index(b'{"levelname": "INFO"')]
    assert got[1]["level"] == "ERROR" and got[1]["job"] == "01000000"


JSON_LINE = b'{"asctime": "2025-02-12 12:25:48,767", "levelname": "INFO", "message": "[Rank 3] forwarded"}\n'
FRAMES = b'Traceback (most recent call last):\n  File "driver.py", line 36, in <module>\n    ray.get(refs)\n'


def _msgs(data: bytes) -> list[tuple[str, str | None]]:
    return [(r["msg"], r["exc"]) for r in rows(parse_whole(data, make_ctx("ray"))[0])]


def test_ray_traceback_goes_on_after_forwarded_json_lines_printed_into_it():
    head, code = FRAMES.rsplit(b"    ", 1)  # into the frames, and between the last frame and the exception
    data = head + JSON_LINE * 3 + b"    " + code + JSON_LINE + b"ValueError: boom\n"
    got = _msgs(data)
    assert got[0] == ("ValueError: boom", FRAMES.decode() + "ValueError: boom")
    assert got[1:] == [("[Rank 3] forwarded", None)] * 4


def test_ray_json_lines_end_what_is_not_a_traceback_and_a_traceback_after_its_exception():
    data = (b"2025-02-12 12:25:48,766 INFO x.py:1 -- config:\n" + JSON_LINE + b"  lr: 0.1\n"
            + FRAMES + b"ValueError: boom\n" + JSON_LINE + b"next print\n")
    msgs = [m for m, _ in _msgs(data)]
    assert msgs == ["config:", "[Rank 3] forwarded", "  lr: 0.1", "ValueError: boom", "[Rank 3] forwarded",
                    "next print"]


@pytest.mark.parametrize(("forwarded", "whole"), [(FORWARDED_BATCH, True), (FORWARDED_BATCH + 1, False)])
def test_ray_a_traceback_is_carried_over_one_forwarded_batch_at_most(forwarded, whole):
    data = FRAMES + JSON_LINE * forwarded + b"ValueError: boom\n"
    got = _msgs(data)
    assert (got[0][0] == "ValueError: boom") is whole
    assert len(got) == forwarded + (1 if whole else 2)


def test_torchrun_tee_prefix_and_rank_prefix_stack():
    line = f"[default2]:[rank10]:[E1202 13:04:05.123000 4242 ProcessGroupNCCL.cpp:616] {nccl_watchdog(10)}\n"
    (row,) = rows(parse_whole(line.encode(), make_ctx("torchrun", fields={"job": "run", "attempt": 1}))[0])
    assert (row["local_rank"], row["rank"], row["role"], row["level"], row["job"]) == (2, 10, "default", "ERROR", "run")
    assert row["msg"] == nccl_watchdog(10)
    assert json.loads(row["attrs"]) == {"attempt": 1, "file": "ProcessGroupNCCL.cpp:616", "tz_assumed": "UTC"}


def test_torchrun_error_json_is_one_error_record():
    error = {"message": {"message": "RuntimeError: CUDA error: an illegal memory access was encountered",
                         "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  File \"t.py\"\nRuntimeError: x\n",
                                       "timestamp": "1796224695"}}}
    data = json.dumps(error).encode()
    ctx = make_ctx("torchrun-error", fields={"local_rank": 1, "job": "run", "attempt": 0})
    assert parse(data[:30], 0, ctx, final=False, read_time_ns=READ_TIME_NS).consumed == 0  # still being written
    (row,) = rows(parse_whole(data, ctx)[0])
    assert row["level"] == "ERROR" and row["msg"].startswith("RuntimeError: CUDA error")
    assert row["exc"].startswith("Traceback") and row["ts"] == 1_796_224_695_000_000_000
    assert (row["local_rank"], row["job"]) == (1, "run")


def test_torchrun_error_json_that_never_completes_is_kept_as_text():
    table, errors = parse_whole(b'{"message": {"message": "trunc', make_ctx("torchrun-error"))
    assert table.num_rows == 1 and errors == 1


@pytest.mark.parametrize("fmt", ["verl-console", "python", "ray", "torchrun"])
def test_verl_step_lines_give_step_and_metrics_in_every_text_format(fmt):
    line = verl_step_line(12).replace("actor/grad_norm:", "actor/grad_norm:nan - was:")
    prefix = "(TaskRunner pid=2231) " if fmt in ("ray", "verl-console") else ""
    data = f"{prefix}{line}\n2026-12-02 13:04:05,123 - verl - INFO - {verl_step_line(13)}\n".encode()
    first, second = rows(parse_whole(data, make_ctx(fmt))[0])
    assert (first["step"], second["step"]) == (12, 13)
    metrics = json.loads(first["attrs"])["metrics"]
    assert metrics["actor/grad_norm"] == "nan" and isinstance(metrics["perf/throughput"], float)
    assert json.loads(second["attrs"])["metrics"]["perf/throughput"] == pytest.approx(
        float(verl_step_line(13).split("perf/throughput:")[1].split(" ")[0]))


def test_verl_jsonl_lines():
    data = b'{"step": 1, "data": {"actor/pg_loss": 0.12, "perf/throughput": 1532.1}}\n{"step": 2, "data": {"actor/pg_loss": NaN}}\n'
    first, second = rows(parse_whole(data, make_ctx("verl-jsonl"))[0])
    assert (first["step"], first["msg"], first["level"]) == (1, "step 1", "INFO")
    # verl's lines carry no time: without any in the file, both take the file's (here: unknown) time, marked
    assert json.loads(first["attrs"]) == {"metrics": {"actor/pg_loss": 0.12, "perf/throughput": 1532.1},
                                          "ts_inferred": "read"}
    assert json.loads(second["attrs"]) == {"metrics": {"actor/pg_loss": "nan"}, "ts_inferred": "read"}


def test_text_regex_named_groups_fill_fields_and_attrs():
    regex = r"^(?P<ts>\S+) \[(?P<level>\w+)\] rank=(?P<rank>\d+) node=(?P<node>\S+) (?P<msg>.*)$"
    data = b"2026-12-02T13:04:05Z [warn] rank=7 node=gpu-3 temperature high\nnot matching\n"
    first, second = rows(parse_whole(data, make_ctx("text", options={"regex": regex}))[0])
    assert (first["ts"], first["level"], first["rank"], first["msg"]) == (1_796_216_645_000_000_000, "WARNING", 7,
                                                                          "temperature high")
    assert json.loads(first["attrs"]) == {"node": "gpu-3"}
    # a line without a time takes the previous line's, marked as inferred
    assert second["msg"] == "not matching" and second["ts"] == first["ts"]
    assert json.loads(second["attrs"]) == {"ts_inferred": "previous"}


def test_text_default_is_the_whole_line_with_a_guessed_level():
    got = rows(parse_whole(b"all good\nFATAL: lost GPU\n  at line 3\n", make_ctx("text"))[0])
    assert [(r["msg"], r["level"]) for r in got] == [("all good", "UNKNOWN"), ("FATAL: lost GPU\n  at line 3", "CRITICAL")]


@pytest.mark.parametrize("regex", ["(?P<msg>(", "no groups", r"(?<=x)(?P<msg>.*)"])
def test_bad_text_regex_is_a_config_error(regex):
    with pytest.raises(ConfigError, match="regex"):
        parse_whole(b"x\n", make_ctx("text", options={"regex": regex}))


def test_ranklog_text_layout():
    data = (b"2026-12-02T13:04:05.123456Z ERROR train [rank=3 step=12 job=j1 loss=0.5 note=\"a b\"] step failed\n"
            b"Traceback (most recent call last):\n  File \"t.py\", line 1\nValueError: x\n")
    (row,) = rows(parse_whole(data, make_ctx("ranklog-text", fields={"pid": 9}))[0])
    assert (row["rank"], row["step"], row["job"], row["pid"], row["msg"]) == (3, 12, "j1", 9, "step failed")
    assert json.loads(row["attrs"]) == {"loss": 0.5, "note": "a b"}
    assert row["exc"].endswith("ValueError: x") and row["ts"] == 1_796_216_645_123_456_000


def test_unknown_format_is_rejected():
    with pytest.raises(ValueError, match="unknown format"):
        parse(b"x\n", 0, make_ctx("nope"), final=True, read_time_ns=READ_TIME_NS)
