"""Real torchrun runs (CPU, gloo, 4 ranks) produce two scenarios; triage reads their --log-dir tree
(per-rank stdout/stderr.log and error.json) and names the rank that misbehaved."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ranklog import cli
from tests.helpers.net import free_port
from tests.helpers.triage_exit import assert_exit

JOB = Path(__file__).parent / "jobs" / "gloo_job.py"
torch = pytest.importorskip("torch", reason="needs torch (pip install 'ranklog[torch]'; a CPU wheel is enough)")


def _torchrun(tmp_path: Path, mode: str) -> Path:
    log_dir = tmp_path / "torchrun-logs"
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or "torchrun"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TORCHELASTIC_ERROR_FILE": ""}
    env.pop("TORCHELASTIC_ERROR_FILE")
    out = subprocess.run([torchrun, "--nproc-per-node", "4", "--log-dir", str(log_dir), "--redirects", "3",
                          "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{free_port()}",
                          "--rdzv-id", f"gloo-{mode}", "--max-restarts", "0", str(JOB), mode],
                         capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert out.returncode != 0, "the job was supposed to fail"
    assert list(log_dir.glob("*/attempt_0/1/stderr.log")), out.stderr[-2000:]
    return log_dir


def _triage(capsys, log_dir: Path) -> dict:
    code = cli.main(["triage", "--log_dir", str(log_dir), "--json"])
    result = json.loads(capsys.readouterr().out)
    assert_exit(code, result)
    return result


@pytest.mark.slow
def test_uncaught_exception_on_one_rank(tmp_path, capsys):
    log_dir = _torchrun(tmp_path, "raise")
    assert list(log_dir.glob("*/attempt_0/1/error.json")), "torchrun's @record should have written error.json"
    verdict = _triage(capsys, log_dir)["verdict"]
    assert verdict["status"] == "failure"
    assert verdict["category"] == "uncaught exception", verdict["summary"]
    assert verdict["ranks"] == [1], verdict["summary"]
    decisive = verdict["decisive"]
    assert "label index 1024 is out of range" in decisive["msg"] + (decisive["exc"] or "")


@pytest.mark.slow
def test_hang_in_gloo_allreduce(tmp_path, capsys):
    log_dir = _torchrun(tmp_path, "hang")
    result = _triage(capsys, log_dir)
    verdict = result["verdict"]
    assert verdict["category"] == "hang/silence", verdict["summary"]
    assert verdict["ranks"] == [1], verdict["summary"]
    # No timestamps in these files: the evidence is that rank 1 alone never reported the timeout.
    assert result["evidence"]["seqnums"]["absent"] == [1]
    # The silence is dated against the other ranks' collective timeout (the hang rule's wording).
    assert "quiet" in verdict["summary"] and "collective timeout" in verdict["summary"], verdict["summary"]
