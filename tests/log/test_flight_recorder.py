"""The flight recorder opt-in (``ranklog.log.flight_recorder``) with real torch + gloo ranks: the rank that
died of a collective timeout and the rank the launcher stopped with SIGTERM each leave a dump beside
their logs, and the dumps tell which collective the stopped rank never entered."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.net import free_port
from tests.helpers.procs import REPO

JOB = Path(__file__).resolve().parent / "jobs" / "fr_ranks.py"
pytestmark = pytest.mark.slow


def _dumps(log_dir: Path) -> dict[int, dict]:
    out = {}
    for path in log_dir.rglob("flight-recorder.rank-*.jsonl"):
        (line,) = path.read_text().splitlines()
        record = json.loads(line)
        out[record["rank"]] = record
    return out


def test_dumps_on_uncaught_timeout_and_on_sigterm(tmp_path):
    pytest.importorskip("torch", reason="the flight recorder dumps torch's collective ring buffer: needs torch (the torch extra)")
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "2",
           "RANKLOG_JOB": "fr-test", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO / "exporters"), os.environ.get("PYTHONPATH", "")])}
    env.pop("TORCH_FR_BUFFER_SIZE", None)
    ranks = [subprocess.Popen([sys.executable, str(JOB), str(tmp_path)], env={**env, "RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    try:
        _, err0 = ranks[0].communicate(timeout=120)
        assert ranks[0].returncode == 1 and "Timed out" in err0, err0[-2000:]
        ranks[1].send_signal(signal.SIGTERM)
        ranks[1].wait(timeout=60)
        assert ranks[1].returncode == -signal.SIGTERM  # the process still dies of SIGTERM
    finally:
        for proc in ranks:
            if proc.poll() is None:
                proc.kill()
    dumps = _dumps(tmp_path)
    assert set(dumps) == {0, 1}
    assert "uncaught RuntimeError" in dumps[0]["msg"] and "SIGTERM" in dumps[1]["msg"]
    assert dumps[0]["logger"] == "ranklog.flight_recorder" and dumps[0]["job"] == "fr-test"
    seqs = {rank: max(e["collective_seq_id"] for e in d["flight_recorder"]["entries"]) for rank, d in dumps.items()}
    assert seqs == {0: 4, 1: 3}  # rank 1 never entered the fourth all_reduce
    assert {e["profiling_name"] for d in dumps.values() for e in d["flight_recorder"]["entries"]} == {"gloo:all_reduce"}
    assert (tmp_path / "fr-test").is_dir() and all(p.parent.parent.name == "fr-test"
                                                   for p in tmp_path.rglob("flight-recorder.*"))


def test_off_by_default(tmp_path):
    from ranklog.log.log_config import resolve

    assert resolve(env={}).flight_recorder is False
    assert resolve(env={"RANKLOG_FLIGHT_RECORDER": "1"}).flight_recorder is True
