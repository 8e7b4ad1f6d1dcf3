"""Parsing what the real tools wrote (tests/scenarios/*/out): verl's reprs and JSONL nulls, torchrun's console."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.compute as pc

from ranklog.parse import detect
from ranklog.parse.directory import read_log_dir

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def _rows(folder: Path) -> list[dict]:
    return read_log_dir(str(folder)).drop_columns(["ts"]).to_pylist()


def test_verl_console_values_in_numpy_reprs_are_numbers_and_nan_is_non_finite():
    rows = [r for r in _rows(SCENARIOS / "verl_console_nan" / "out") if r["step"] is not None]
    by_step = {r["step"]: json.loads(r["attrs"])["metrics"] for r in rows}
    assert sorted(by_step) == list(range(1, 9))
    assert isinstance(by_step[1]["actor/grad_norm"], float)  # printed as np.float64(0.34…)
    assert isinstance(by_step[1]["response_length/max"], int)  # printed as np.int32(877)
    assert by_step[4]["actor/grad_norm"] != "nan" and by_step[5]["actor/grad_norm"] == "nan"
    assert all("step_fields" not in json.loads(r["attrs"]) for r in rows)


def test_verl_jsonl_null_is_a_non_finite_metric_named_in_the_message():
    rows = _rows(SCENARIOS / "verl_jsonl_nan" / "out")
    assert {r["format"] for r in rows} == {"verl-jsonl"}
    step4 = next(r for r in rows if r["step"] == 4)
    assert json.loads(step4["attrs"])["metrics"]["actor/grad_norm"] == "nan"
    assert "actor/grad_norm:nan" in step4["msg"]
    assert next(r for r in rows if r["step"] == 3)["msg"] == "step 3"


def test_torchrun_launcher_console_with_tee_prefixes_is_read_per_local_rank():
    node1 = SCENARIOS / "torchrun_exception" / "out" / "node1"
    assert detect(str(node1 / "torchrun.console.log")).format == "torchrun"
    table = read_log_dir(str(SCENARIOS / "torchrun_exception" / "out"))
    console = table.filter(pc.match_substring(table["source"], "node1/torchrun.console.log"))
    steps = console.filter(pc.match_substring(console["msg"], "step 3 micro 0"))
    assert sorted(steps["local_rank"].to_pylist()) == [0, 1]
    assert set(steps["step"].to_pylist()) == {3}
    assert set(table["host"].to_pylist()) == {"node0", "node1"}  # per-node --log-dir folders
    assert json.loads(steps["attrs"][0].as_py()).get("ts_inferred") is None  # the worker's own time, parsed


def test_pytorch_rank_prefix_in_a_rank_file_is_the_global_rank_and_the_traceback_one_error():
    """PyTorch writes an uncaught exception of a process-group rank as `[rank3]: Traceback …`: in the
    rank's own --log-dir file that is the global rank (not torchrun's `[<role><local rank>]:` tee
    prefix), and the traceback is one ERROR record whose message is the exception."""
    table = read_log_dir(str(SCENARIOS / "torchrun_exception" / "out"))
    rank_files = table.filter(pc.match_substring_regex(table["source"], r"attempt_\d+/\d+/stderr\.log$"))
    crashes = [r for r in rank_files.drop_columns(["ts"]).to_pylist() if r["exc"]]
    assert crashes, "no traceback record in the ranks' stderr files"
    for row in crashes:
        local_rank = int(row["source"].split("/")[-2])
        assert (row["level"], row["local_rank"]) == ("ERROR", local_rank), row["source"]
        # torchrun's role, where the launcher's console tees this process's lines (the same pid)
        assert row["role"] in (None, "default"), row["role"]
        assert row["rank"] is not None and row["exc"].startswith("Traceback (most recent call last):")
        assert re.match(r"[\w.]+(Error|Exception): ", row["msg"]), row["msg"][:200]
    assert all(r["role"] != "rank" for r in table.select(["role"]).to_pylist())
