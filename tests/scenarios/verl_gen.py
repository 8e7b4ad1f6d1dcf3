"""Run verl's ``Tracking`` loggers (console and/or JSONL file) in a small training loop, as one node.

The driver's console is captured to ``out/<host>/verl.console.log`` (as a job scheduler captures it);
the file backend writes ``out/<host>/metrics/<experiment>.jsonl`` (``VERL_FILE_LOGGER_PATH``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.scenarios.nodes import hosts_file, on_node, shown

WORKER = Path(__file__).resolve().parent / "workers" / "verl_train.py"


@dataclass
class VerlRun:
    host: str = "node0"
    backends: str = "console"
    worker_args: list[str] = field(default_factory=list)


def _argv(job: VerlRun) -> list[str]:
    return [sys.executable, str(WORKER), "--backends", job.backends, *job.worker_args]


def run(job: VerlRun, out: Path) -> int:
    if out.exists():
        shutil.rmtree(out)
    node_dir = out / job.host
    (node_dir / "metrics").mkdir(parents=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "VERL_FILE_LOGGER_PATH": str(node_dir / "metrics" / "qwen-tiny.jsonl")}
    with hosts_file([job.host]) as hosts, open(node_dir / "verl.console.log", "wb") as console:
        done = subprocess.run(on_node(job.host, hosts, _argv(job)), stdout=console, stderr=subprocess.STDOUT,
                              cwd=node_dir, env=env, timeout=600)
    if job.backends == "file":
        (node_dir / "verl.console.log").unlink()  # the JSONL scenario: the metrics file alone
    return done.returncode


def command_lines(job: VerlRun) -> list[str]:
    return [shown(job.host, _argv(job))]
