"""Triage reads verl console output and plain text too (the parsers recognise them by content)."""

from __future__ import annotations

import json

from ranklog import cli
from tests.helpers.triage_exit import assert_exit

from .scenarios import messages as m


def _triage(capsys, log_dir) -> dict:
    code = cli.main(["triage", "--log_dir", str(log_dir), "--json"])
    result = json.loads(capsys.readouterr().out)
    assert_exit(code, result)
    return result


def test_verl_console_nan_metrics(tmp_path, capsys):
    lines = [m.verl_console(step, {"actor/pg_loss": f"{1.5 / step:.4f}", "actor/grad_norm": "0.8123",
                                   "perf/throughput": 3050.2}) for step in range(1, 42)]
    lines += [m.verl_console(step, {"actor/pg_loss": "nan", "actor/grad_norm": "nan", "perf/throughput": 3050.2})
              for step in (42, 43)]
    (tmp_path / "verl_console.log").write_text("\n".join(lines) + "\n")
    result = _triage(capsys, tmp_path)
    verdict = result["verdict"]
    assert verdict["category"] == "non-finite loss/gradients", verdict["summary"]
    assert "actor/pg_loss:nan" in verdict["decisive"]["msg"]
    assert verdict["decisive"]["msg"].startswith("step:42") or verdict["step"] == 42


def test_plain_text_traceback(tmp_path, capsys):
    body = ["loading shards", "step 1 loss 2.31", "step 2 loss 2.07",
            m.traceback(m.TRAIN_FRAMES, m.cuda_oom(gpu=0, pid=4242))]
    (tmp_path / "train.out").write_text("\n".join(body) + "\n")
    verdict = _triage(capsys, tmp_path)["verdict"]
    assert verdict["category"] == "CUDA OOM", verdict["summary"]
    assert "Traceback (most recent call last)" in (verdict["decisive"]["exc"] or verdict["decisive"]["msg"])
