"""Metrics read from the logs, checked after a scripted workload (real agent process, real strings)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.agent.scripted_archive import scripted_archive
from tests.helpers.agent_proc import running_agent

pytestmark = pytest.mark.slow

NCCL_WATCHDOG = ("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=18, OpType=ALLREDUCE, "
                 "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.")
CUDA_OOM_EXC = ("Traceback (most recent call last):\n  File \"train.py\", line 10, in <module>\n    loss.backward()\n"
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                "capacity of 79.15 GiB of which 1.2 GiB is free.")
RAY_OOM = ("Task was killed due to the node running low on memory. Memory on the node (IP: 10.0.0.3, "
           "ID: 6f2c) where the task was running was 30.50GB / 32.00GB (0.953).")


def _record(ts: str, level: str, msg: str, rank: int, **extra) -> str:
    return json.dumps({"ts": ts, "level": level, "msg": msg, "rank": rank, "job": "job-7", **extra}) + "\n"


def _workload() -> str:
    lines = [_record(f"2026-12-02T12:00:0{i}.000000Z", "INFO", f"step {i} done", 0, step=i,
                     **{"actor/pg_loss": 0.5 - i / 10, "perf/throughput": 1000.0 + i, "not_allowed": 1.0})
             for i in range(1, 4)]
    lines += [
        _record("2026-12-02T12:00:05.000000Z", "WARNING", "slow step", 1),
        _record("2026-12-02T12:00:06.000000Z", "ERROR", NCCL_WATCHDOG, 3),
        _record("2026-12-02T12:00:07.000000Z", "ERROR", "training step failed", 2, exc=CUDA_OOM_EXC),
        _record("2026-12-02T12:00:08.000000Z", "ERROR", RAY_OOM, 1),
        _record("2026-12-02T12:00:09.500000Z", "CRITICAL", "grad_norm is not finite: nan", 0, step=4),
    ]
    return "".join(lines)


def test_metrics_after_a_scripted_workload(tmp_path: Path, token_file: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "train.jsonl").write_text(_workload())
    with scripted_archive() as archive, running_agent([archive.url], token_file, tmp_path / "state",
                                                      sources=[f"{logs}/*.jsonl:ranklog"]) as agent:
        scrape = agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 8, what="8 records")
    records = "ranklog_log_records_total"
    assert scrape.value(records, level="INFO", training_job="job-7", rank="0") == 3
    assert scrape.value(records, level="ERROR", training_job="job-7") == 3
    assert scrape.value(records, level="WARNING", rank="1") == 1
    assert scrape.value(records, level="CRITICAL", rank="0") == 1
    signature = "ranklog_failure_signatures_total"
    assert scrape.value(signature, signature="nccl_timeout", training_job="job-7", rank="3") == 1
    assert scrape.value(signature, signature="cuda_oom", rank="2") == 1
    assert scrape.value(signature, signature="ray_oom_kill", rank="1") == 1
    assert scrape.value(signature, signature="nonfinite_grad", rank="0") == 1
    assert scrape.value("ranklog_training_step", training_job="job-7", rank="0") == 4
    assert scrape.value("ranklog_training_metric", training_job="job-7", rank="0", name="actor/pg_loss") == pytest.approx(0.2)
    assert scrape.value("ranklog_training_metric", rank="0", name="perf/throughput") == 1003.0
    assert not [s for s in scrape.labels("ranklog_training_metric") if s["name"] == "not_allowed"]
    last = "ranklog_last_record_timestamp_seconds"
    assert scrape.value(last, training_job="job-7", rank="0") == pytest.approx(1796212809.5)
    assert scrape.value(last, training_job="job-7", rank="3") == pytest.approx(1796212806.0)
    assert scrape.value("ranklog_agent_bytes_read_total") == (logs / "train.jsonl").stat().st_size
    assert archive.accepted_rows == 8
