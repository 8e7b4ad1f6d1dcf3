"""Trace context: blocks, explicit ids, asyncio, and inheritance into child processes."""

from __future__ import annotations

import subprocess
import sys

from ranklog.log import context
from tests.helpers.log_files import PRELUDE, all_records, child_env, run_python
from tests.helpers.procs import ranklog_cmd


def test_trace_blocks_nest_and_cover_asyncio_tasks(tmp_path):
    run_python("""
        import asyncio
        log.info("outside")
        with ranklog.trace("outer"):
            log.info("in outer")
            with ranklog.trace("inner"):
                log.info("in inner")
            log.info("back in outer")

            async def task():
                log.info("in task")
            asyncio.run(task())
        log.info("after", extra={"trace_id": "explicit"})

        @ranklog.trace("decorated")
        def work():
            log.info("in decorated")
        work()
    """, tmp_path)
    got = {r["msg"]: r.get("trace_id") for r in all_records(tmp_path)}
    assert got == {"outside": None, "in outer": "outer", "in inner": "inner", "back in outer": "outer",
                   "in task": "outer", "after": "explicit", "in decorated": "decorated"}


def test_trace_propagates_into_a_subprocess(tmp_path):
    child = PRELUDE + "log.info('child says hi')"
    run_python(f"""
        import subprocess
        with ranklog.trace("train_20251013_001"):
            log.info("parent")
            from ranklog.log import context_env
            env = {{**os.environ, **context_env()}}
            subprocess.run([sys.executable, "-c", {child!r}], env=env, check=True)
    """, tmp_path)
    records = all_records(tmp_path)
    assert {r["msg"]: r["trace_id"] for r in records} == {"parent": "train_20251013_001",
                                                          "child says hi": "train_20251013_001"}
    assert len({r["pid"] for r in records}) == 2


def test_ranklog_context_output_is_inherited_through_the_environment(tmp_path):
    printed = subprocess.run(ranklog_cmd("context", "--trace-id", "run 7/a"), env=child_env(), capture_output=True,
                             text=True, check=True).stdout.strip()
    assert " " not in printed and context.parse(printed).trace_id == "run 7/a"
    run_python("log.info('x'); print(ranklog.current_trace_id())", tmp_path, env={"RANKLOG_TRACE_CONTEXT": printed})
    (record,) = all_records(tmp_path)
    assert record["trace_id"] == "run 7/a"


def test_context_encoding_round_trips_and_accepts_traceparent():
    ctx = context.parse(context.new_context("a,b=c/d"))
    assert ctx.trace_id == "a,b=c/d" and len(ctx.span_id) == 16
    fresh = context.parse(context.new_context())
    assert len(fresh.trace_id) == 32 and fresh.trace_id != context.parse(context.new_context()).trace_id
    w3c = context.parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
    assert (w3c.trace_id, w3c.span_id) == ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")
    assert context.parse("") is None and context.parse("garbage") is None


def test_ray_runtime_env_carries_context_and_settings(monkeypatch):
    monkeypatch.setenv("RANKLOG_LOG_DIR", "/shared/logs")
    monkeypatch.setenv("RANKLOG_JOB", "rl-job")
    with context.trace("ray-trace"):
        runtime_env = context.ray_runtime_env({"pip": ["x"], "env_vars": {"RANKLOG_JOB": "user-wins"}})
    env_vars = runtime_env["env_vars"]
    assert runtime_env["pip"] == ["x"]
    assert env_vars["RANKLOG_LOG_DIR"] == "/shared/logs" and env_vars["RANKLOG_JOB"] == "user-wins"
    assert context.parse(env_vars["RANKLOG_TRACE_CONTEXT"]).trace_id == "ray-trace"


def test_context_command_inherit(tmp_path):
    parent = context.new_context("parent-trace")
    out = subprocess.run(ranklog_cmd("context", "--inherit"), env=child_env(RANKLOG_TRACE_CONTEXT=parent),
                         capture_output=True, text=True, check=True).stdout.strip()
    assert context.parse(out).trace_id == "parent-trace" and context.parse(out).span_id != context.parse(parent).span_id
    failed = subprocess.run(ranklog_cmd("context", "--inherit"), env=child_env(), capture_output=True, text=True)
    assert failed.returncode == 2 and "RANKLOG_TRACE_CONTEXT" in failed.stderr and "Traceback" not in failed.stderr
    assert sys.executable
