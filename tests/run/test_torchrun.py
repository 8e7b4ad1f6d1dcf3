"""The real launcher: `torchrun --no-python ranklog run -- python train.py` (needs torch; slow)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.log_files import all_records, child_env, ranklog_files
from tests.helpers.net import free_port

TORCHRUN = Path(sys.executable).with_name("torchrun")

TRAIN = """
import os, sys, time
import ranklog
log = ranklog.get_logger("train")
rank = int(os.environ["RANK"])
print(f"rank {rank} of {os.environ['WORLD_SIZE']} starting", flush=True)
log.info("logger on rank %d", rank, extra={"step": 0})
if rank == 1:
    raise ValueError("rank 1 hit a bad batch")
deadline = time.monotonic() + 60          # rank 0 waits until torchrun stops it
while time.monotonic() < deadline:
    time.sleep(0.1)
"""


@pytest.mark.slow
@pytest.mark.skipif(not TORCHRUN.exists() or shutil.which("ranklog", path=str(TORCHRUN.parent)) is None,
                    reason="torch (torchrun) is not installed in this environment: pip install torch")
def test_torchrun_no_python_each_rank_writes_its_own_file(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    env = child_env(PATH=f"{TORCHRUN.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    argv = [str(TORCHRUN), "--nnodes", "1", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--rdzv-id", "tr-job-1", "--monitor-interval", "0.2",
            "--no-python", "ranklog", "run", "--log_dir", str(tmp_path / "logs"), "--", sys.executable, str(script)]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert proc.returncode != 0, proc.stdout + proc.stderr  # rank 1 failed, so the job failed
    files = ranklog_files(tmp_path / "logs")
    assert {f.parent.parent.name for f in files} == {"tr-job-1"}  # TORCHELASTIC_RUN_ID
    records = all_records(tmp_path / "logs")
    for rank in (0, 1):
        mine = [r for r in records if r.get("rank") == rank]
        assert {r["msg"] for r in mine} >= {f"rank {rank} of 2 starting", f"logger on rank {rank}"}
        assert all(r["local_rank"] == rank and r["job"] == "tr-job-1" for r in mine)
        assert len({f.name for f in files if f.name.startswith(f"rank-{rank}.")}) == 2
    (crash,) = [r for r in records if r.get("exc")]
    assert crash["rank"] == 1 and crash["msg"] == "ValueError: rank 1 hit a bad batch"
