"""Run Python snippets that use ranklog's logger in real processes, and read the files they write.

Usable by any area that needs genuine ranklog files (parsers, agent, query):
``write_ranklog_files(log_dir, "log.info('x')", env={"RANK": "3"})``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.helpers.procs import REPO

PRELUDE = "import ranklog, logging, os, sys, time\nlog = ranklog.get_logger('test')\n"


def child_env(log_dir: Path | None = None, **extra: str) -> dict[str, str]:
    """os.environ without launcher/ranklog variables that would leak into a test, plus `extra`."""
    drop = ("RANK", "LOCAL_RANK", "GROUP_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE", "SLURM_", "OMPI_", "PMI_",
            "PMIX_", "TORCHELASTIC_", "RAY_JOB_ID", "PBS_JOBID", "LSB_JOBID", "JOB_ID", "ROLE_NAME", "RANKLOG_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "exporters"), str(REPO), env.get("PYTHONPATH")]))
    if log_dir is not None:
        env["RANKLOG_LOG_DIR"] = str(log_dir)
    env.update(extra)
    return env


def run_python(code: str, log_dir: Path | None = None, env: dict[str, str] | None = None, timeout: float = 60,
               prelude: bool = True, check: bool = True, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run `code` (after :data:`PRELUDE`) in a fresh interpreter; output captured as text."""
    source = (PRELUDE if prelude else "") + textwrap.dedent(code)
    proc = subprocess.run([sys.executable, "-c", source], env=child_env(log_dir, **(env or {})), timeout=timeout,
                          capture_output=True, text=True, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"child failed ({proc.returncode}):\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def ranklog_files(log_dir: Path, suffix: str = ".jsonl") -> list[Path]:
    return sorted(p for p in Path(log_dir).rglob(f"*{suffix}") if p.is_file())


def read_records(path: Path) -> list[dict]:
    """Every line of a ranklog JSON file as a dict (fails on a torn or non-JSON line)."""
    records = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            assert line.endswith("\n"), f"{path}:{number}: line without newline (torn write)"
            records.append(json.loads(line))
    return records


def all_records(log_dir: Path) -> list[dict]:
    return [record for path in ranklog_files(log_dir) for record in read_records(path)]


def write_ranklog_files(log_dir: Path, code: str, env: dict[str, str] | None = None) -> list[Path]:
    """Run `code` with `log` = ranklog.get_logger('test') writing under `log_dir`; returns the files."""
    run_python(code, log_dir, env)
    return ranklog_files(log_dir)
