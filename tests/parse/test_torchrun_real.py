"""A real `torchrun` run: the files it lays out are recognised and parsed (proves the layout is not invented)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ranklog.parse import SourceContext, detect, parse
from ranklog.parse.directory import read_log_dir
from tests.parse.conftest import READ_TIME_NS

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch==2.13.0, the local CPU build)")

SCRIPT = textwrap.dedent('''
    import logging, os, time
    from torch.distributed.elastic.multiprocessing.errors import record

    @record
    def main():
        logging.basicConfig(level=logging.INFO, format="%(asctime)s - %(name)s - %(levelname)s - %(message)s")
        rank = int(os.environ["RANK"])
        print(f"hello from rank {rank}", flush=True)
        logging.getLogger("train").info("step:1 - actor/pg_loss:0.123 - perf/throughput:1532.1")
        if rank == 0:
            open("rank0-logged", "w").close()
        if rank == 1:
            # torchrun stops the other workers once one fails: wait until rank 0 has logged its step
            for _ in range(600):
                if os.path.exists("rank0-logged"):
                    break
                time.sleep(0.1)
            raise RuntimeError("CUDA error: an illegal memory access was encountered")

    main()
''')


@pytest.mark.slow
def test_torchrun_log_dir_and_tee_output(tmp_path: Path):
    (tmp_path / "tiny.py").write_text(SCRIPT)
    torchrun = Path(sys.executable).with_name("torchrun")
    result = subprocess.run(
        [str(torchrun), "--nproc-per-node", "2", "--log-dir", "logs", "--redirects", "3", "--tee", "3", "tiny.py"],
        cwd=tmp_path, capture_output=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode != 0  # rank 1 failed on purpose
    files = sorted(p for p in (tmp_path / "logs").rglob("*") if p.is_file())
    found = {p.relative_to(tmp_path / "logs").as_posix(): detect(str(p)) for p in files}
    assert all(d is not None for d in found.values()), found
    formats = sorted(d.format for d in found.values())
    assert formats == ["torchrun"] * 4 + ["torchrun-error"]
    assert {d.fields["local_rank"] for d in found.values()} == {0, 1}

    table = read_log_dir(str(tmp_path / "logs"))
    rows = table.drop_columns(["ts"]).to_pylist()
    error = next(r for r in rows if r["format"] == "torchrun-error")
    assert error["level"] == "ERROR" and error["local_rank"] == 1
    assert "CUDA error: an illegal memory access" in error["msg"] and error["exc"].startswith("Traceback")
    crash = next(r for r in rows if r["exc"] and r["format"] == "torchrun")
    assert crash["local_rank"] == 1 and crash["level"] == "ERROR"
    assert crash["msg"] == "RuntimeError: CUDA error: an illegal memory access was encountered"
    steps = [r for r in rows if r["step"] == 1]
    assert sorted(r["local_rank"] for r in steps) == [0, 1]
    assert all(json.loads(r["attrs"])["metrics"]["perf/throughput"] == 1532.1 for r in steps)
    assert {r["job"] for r in rows} == {next(iter(found.values())).fields["job"]}

    # the teed console output: `[default0]:` prefixes give the local rank, the traceback stays one record
    ctx = SourceContext("console", "console-id", "torchrun", "node1", "10.0.0.1")
    console = parse(result.stderr + result.stdout, 0, ctx, final=True, read_time_ns=READ_TIME_NS)
    console_rows = console.batch.drop_columns(["ts"]).to_pylist()
    tee_crash = [r for r in console_rows if r["local_rank"] == 1 and r["exc"]]
    assert len(tee_crash) == 1 and tee_crash[0]["msg"].startswith("RuntimeError: CUDA error")
    assert {r["local_rank"] for r in console_rows if r["role"] == "default"} == {0, 1}
    # (torchrun's tail threads share one stdout, so a line may come out torn; the prefixed ones are whole)
    hellos = [r for r in console_rows if r["role"] == "default" and r["msg"].startswith("hello from rank")]
    assert hellos and all(r["msg"] == f"hello from rank {r['local_rank']}" for r in hellos)
