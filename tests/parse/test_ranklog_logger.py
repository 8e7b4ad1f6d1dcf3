"""The files the real ranklog logger writes (JSON and text layouts) are recognised and parsed back exactly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ranklog.parse import detect
from ranklog.parse.directory import read_log_dir
from tests.helpers.procs import REPO

SCRIPT = textwrap.dedent('''
    import sys, ranklog
    ranklog.configure(log_dir=sys.argv[1], format=sys.argv[2], job="it-job", flush_interval=0.05)
    log = ranklog.get_logger("train.loop")
    log.info("step %d done", 7, extra={"step": 7, "loss": 0.25, "note": "warm"})
    log.warning("temperature high")
    try:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    except RuntimeError:
        log.exception("step failed")
    log.info("after the failure")
    ranklog.shutdown()
''')


@pytest.mark.parametrize(("layout", "fmt"), [("json", "ranklog"), ("text", "ranklog-text")])
def test_real_logger_output_round_trips(tmp_path: Path, layout, fmt):
    env = {**os.environ, "RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8",
           "PYTHONPATH": os.pathsep.join([str(REPO / "exporters"), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), layout], check=True, env=env, timeout=120)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) == 1
    found = detect(str(files[0]))
    assert found is not None and found.format == fmt
    assert found.fields["rank"] == 3 and found.fields["job"] == "it-job"
    rows = read_log_dir(str(tmp_path)).drop_columns(["ts"]).to_pylist()
    assert [r["msg"] for r in rows] == ["step 7 done", "temperature high", "step failed", "after the failure"]
    assert [r["level"] for r in rows] == ["INFO", "WARNING", "ERROR", "INFO"]
    assert {(r["rank"], r["local_rank"], r["job"], r["logger"]) for r in rows} == {(3, 1, "it-job", "train.loop")}
    assert [r["seq"] for r in rows] == [1, 2, 3, 4]
    assert rows[0]["step"] == 7
    failed = rows[2]
    assert failed["exc"].startswith("Traceback (most recent call last):")
    assert failed["exc"].rstrip().endswith("RuntimeError: CUDA error: an illegal memory access was encountered")
    if layout == "json":  # the text layout does not carry extra fields
        assert json.loads(rows[0]["attrs"]) == {"loss": 0.25, "note": "warm"}
