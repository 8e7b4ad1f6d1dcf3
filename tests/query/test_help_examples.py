"""The examples in every command's ``--help`` run as printed, against real data and a live archive.

Placeholders are swapped for real things: ``/srv/ranklog`` → an archive directory holding a real
job (:mod:`tests.helpers.ops_data`), ``https://archive:8470`` → a live archive (on a free loopback
port: 8470 itself may be taken on a test machine), ``token`` → its token file, ``./logs`` and Ray's
``session_latest/logs`` → the job's log directory, config paths → valid configs, job ids → the job. ``| jq …`` is
checked in Python (the output must be JSON with that key). The ``--annotate`` example posts to
Grafana, which cannot run here (see DESIGN.md), and is not run.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from ranklog.cli import COMMANDS, build_parser
from tests.helpers.archive_proc import running_archive
from tests.helpers.ops_data import JOB, job_logs_and_archive

DEFAULT_PORT = 8470


pytestmark = pytest.mark.slow  # real subprocesses per command (~20 s)

def examples() -> list[str]:
    found = []
    for name in COMMANDS:
        epilog = build_parser(name).epilog or ""
        text = epilog.replace("\\\n", " ")
        found += [" ".join(line.split()) for line in text.splitlines() if line.strip().startswith("ranklog ")]
    return list(dict.fromkeys(found))


def test_examples_use_the_real_default_port() -> None:
    ports = {int(p) for example in examples() for p in re.findall(r"://[\w.-]+:(\d+)", example)}
    assert ports == {DEFAULT_PORT}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, request):
    base = tmp_path_factory.mktemp("examples")
    logs, archive_root = job_logs_and_archive(base)
    token = base / "token"
    token.write_text("example-token-0123456789abcdef\n")
    (base / "agent.yaml").write_text("archive: [http://127.0.0.1:8470]\ntoken_file: /etc/ranklog/token\n"
                                     "preset: [ranklog]\n")
    (base / "archive.yaml").write_text("root: /srv/ranklog\ntoken_file: /etc/ranklog/tokens\n")
    with running_archive(base / "live", token) as live:
        yield {"/srv/ranklog": str(archive_root), "https://archive:8470": live.url, "token": str(token),
               "./logs": str(logs), "/tmp/ray/session_latest/logs": str(logs),
               "/etc/ranklog/agent.yaml": str(base / "agent.yaml"), "archive.yaml": str(base / "archive.yaml"),
               "error_analysis.csv": str(base / "error_analysis.csv"), "report.html": str(base / "report.html"),
               "ppo-qwen7b": JOB, "ppo-7b": JOB, "ppo-*": JOB.split("-")[0] + "-*"}


@pytest.mark.parametrize("example", [e for e in examples() if "--annotate" not in e])
def test_help_example_runs(example: str, env: dict[str, str]) -> None:
    command, _, pipe = example.partition(" | ")
    words = [env.get(word, word) for word in shlex.split(command, comments=True)]
    proc = subprocess.run([sys.executable, "-m", "ranklog", *words[1:]], capture_output=True, text=True, timeout=300)
    # exit 1 with "no records matched" is an answer (the live archive holds no such trace), not a failure;
    # so are triage's and report's 1 (a failure found: the example job failed) and 3 (degraded)
    verdict = words[1] in ("triage", "report") and proc.returncode in (1, 3) and "Traceback" not in proc.stderr
    answered = proc.returncode == 0 or verdict or (proc.returncode == 1 and "no records matched" in proc.stderr)
    assert answered, f"{example}: exit {proc.returncode}\n{proc.stderr[-2000:]}"
    if pipe.startswith("jq ."):
        assert pipe.split(".", 1)[1] in json.loads(proc.stdout)
    for output in ("error_analysis.csv", "report.html"):
        if output in example:
            assert Path(env[output]).stat().st_size > 0
