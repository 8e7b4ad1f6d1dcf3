"""Every command RUNBOOK.md tells an on-call engineer to run, run against real data.

The runbook writes ``A`` for the archive, ``J`` for the training job, ``R`` for a rank and ``D``
for a copied log directory (and ``KEY=VALUE`` for a threshold). The test makes a real log directory
with the ranklog logger (:mod:`tests.helpers.ops_data`), substitutes the placeholders and runs each
command: each must exit 0 (triage and report 1: they find the job's failure); triage must print a verdict and ERROR queries the job's CUDA OOM.
Commands of other tools the runbook mentions (``py-spy``, ``nvidia-smi``, ``journalctl``) need a
GPU node or systemd and are not run.
"""

from __future__ import annotations

import re
import shlex
import socket
import subprocess
import sys

import pytest

from dashboards import RUNBOOK
from tests.helpers.ops_data import FAILING_RANK, JOB, job_logs_and_archive
from tests.helpers.procs import REPO

_INLINE = re.compile(r"`((?:ranklog|python -m dashboards)\b[^`]*)`")


pytestmark = pytest.mark.slow  # real subprocesses per command (~20 s)

def runbook_commands(text: str) -> list[str]:
    """``ranklog …`` / ``python -m dashboards…`` lines of code blocks and inline code spans with flags."""
    found = []
    for block in re.findall(r"^```\n(.*?)^```", text, re.S | re.M):
        found += [line.split("  #")[0].strip() for line in block.splitlines() if line.startswith("ranklog ")]
    found += [" ".join(span.split()) for span in _INLINE.findall(text) if "--" in span]
    return list(dict.fromkeys(found))


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    logs, archive = job_logs_and_archive(tmp_path_factory.mktemp("runbook"))
    return {"A": str(archive), "J": JOB, "R": str(FAILING_RANK), "D": str(logs), "KEY=VALUE": "error_burst_errors=100",
            "NODE": socket.gethostname()}


def _substitute(command: str, data: dict[str, str]) -> list[str]:
    words = shlex.split(command)
    out = [data.get(word, word) for word in words]
    if out[0] == "ranklog":
        return [sys.executable, "-m", "ranklog", *out[1:]]
    assert out[:2] == ["python", "-m"], command
    return [sys.executable, *out[1:]]


def test_the_runbook_names_its_commands() -> None:
    commands = runbook_commands(RUNBOOK.read_text(encoding="utf-8"))
    assert any(c.startswith("ranklog triage") for c in commands) and any(c.startswith("ranklog query") for c in commands)
    assert not [c for c in commands if "start_time -" in c], "a relative --start_time is parsed as a flag"


@pytest.mark.parametrize("command", runbook_commands(RUNBOOK.read_text(encoding="utf-8")))
def test_runbook_command_runs(command: str, data: dict[str, str]) -> None:
    proc = subprocess.run(_substitute(command, data), capture_output=True, text=True, timeout=300, cwd=REPO)
    # triage and report exit 1: they find the job's failure. Elsewhere exit 1 with "no records matched"
    # is an answer (this job shipped no refused record), not a failure
    if command.startswith(("ranklog triage", "ranklog report")):
        answered = proc.returncode == 1
    else:
        answered = proc.returncode == 0 or (proc.returncode == 1 and "no records matched" in proc.stderr)
    assert answered, f"{command}: exit {proc.returncode}\n{proc.stderr[-2000:]}"
    if command.startswith("ranklog triage"):
        assert proc.stdout.strip(), f"{command}: printed nothing"
    if "--level ERROR" in command:
        assert "CUDA out of memory" in proc.stdout, proc.stdout[-2000:]
