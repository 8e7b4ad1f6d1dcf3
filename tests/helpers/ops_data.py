"""A small real job for tests that run operator commands (runbook, --help examples).

Two ranks of one job write through the ranklog logger itself (one fails with a CUDA OOM,
timestamped now); the log directory is stored as an archive with the archive's own Parquet writer.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.helpers.procs import REPO
from tests.helpers.query_data import write_archive

JOB, FAILING_RANK = "ops-job", 3
_WRITER = textwrap.dedent("""
    import sys
    import ranklog
    log = ranklog.get_logger("train")
    for step in range(20):
        log.info("step done", extra={"step": step, "loss": 1.0 / (step + 1)})
    if sys.argv[1] == "fail":
        log.error("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
""")


def job_logs_and_archive(base: Path) -> tuple[Path, Path]:
    """(log directory, archive root) holding the same records of job :data:`JOB`."""
    from ranklog.parse.directory import read_log_dir

    logs, archive = base / "logs", base / "archive"
    for rank in (0, FAILING_RANK):
        env = {**os.environ, "RANKLOG_LOG_DIR": str(logs), "RANKLOG_JOB": JOB, "RANK": str(rank),
               "LOCAL_RANK": str(rank), "WORLD_SIZE": "4"}
        subprocess.run([sys.executable, "-c", _WRITER, "fail" if rank == FAILING_RANK else "ok"], env=env,
                       check=True, timeout=120, cwd=REPO)
    write_archive(read_log_dir(str(logs)), archive)
    return logs, archive
