"""A small real job for the everyday-CLI tests: four ranks of one job write through the ranklog logger
(``ranklog.install()``, one trace context shared by every rank, a 400-character warning, rank 2 dying
on an uncaught NCCL error with its traceback), timestamped now; the folder is also stored as an
archive with the archive's own Parquet writer, so both sources hold the same records.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.helpers.procs import REPO, ranklog_cmd
from tests.helpers.query_data import write_archive

JOB, RANKS, FAILING_RANK = "ppo-everyday", 4, 2
LONG = "checkpoint shard written to /mnt/ckpt/" + "/".join(f"part-{i:03d}" for i in range(50))
_WRITER = textwrap.dedent(f"""
    import sys
    import ranklog
    ranklog.install()
    log = ranklog.get_logger("train")
    rank = int(sys.argv[1])
    for step in range(10):
        log.info("step done", extra={{"step": step, "loss": 1.0 / (step + 1)}})
    log.warning({LONG!r})
    if rank == {FAILING_RANK}:
        raise RuntimeError("NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited: ncclRemoteError")
""")


def trace_context() -> str:
    return subprocess.run(ranklog_cmd("context"), capture_output=True, text=True, check=True).stdout.strip()


def run_job(logs: Path, context: str) -> None:
    """The four ranks, one after the other (each a real process writing its own file)."""
    for rank in range(RANKS):
        env = {**os.environ, "RANKLOG_LOG_DIR": str(logs), "RANKLOG_JOB": JOB, "RANK": str(rank),
               "LOCAL_RANK": str(rank), "WORLD_SIZE": str(RANKS), "RANKLOG_TRACE_CONTEXT": context}
        subprocess.run([sys.executable, "-c", _WRITER, str(rank)], env=env, capture_output=True, timeout=120,
                       cwd=REPO, check=rank != FAILING_RANK)


def job_logs_and_archive(base: Path, trace_id: str | None = None) -> tuple[Path, Path, str]:
    """(log directory, archive root, trace id) of :data:`JOB`; a fresh trace id unless `trace_id` is given."""
    from ranklog.log.context import TraceContext, new_span_id, parse
    from ranklog.parse.directory import read_log_dir

    logs, archive = base.resolve() / "logs", base.resolve() / "archive"
    context = TraceContext(trace_id, new_span_id()).encode() if trace_id else trace_context()
    run_job(logs, context)
    write_archive(read_log_dir(str(logs)), archive)
    parsed = parse(context)
    assert parsed is not None
    return logs, archive, parsed.trace_id
