"""`ranklog triage --archive http://…` asks a running archive over HTTP (token required)."""

from __future__ import annotations

import json

import pytest

from ranklog import cli
from tests.helpers.net import free_port, wait_for_port
from tests.helpers.procs import ranklog_cmd, spawn, stop

from .scenarios import SCENARIOS
from .scenarios.archive import write_archive


@pytest.mark.slow
def test_triage_through_a_running_archive(tmp_path, token_file, capsys):
    write_archive(SCENARIOS["clock_skew"]().job.table(), tmp_path / "archive")
    port = free_port()
    proc = spawn(ranklog_cmd("archive", "--root", str(tmp_path / "archive"), "--listen", f"127.0.0.1:{port}",
                             "--token-file", str(token_file), "--state-dir", str(tmp_path / "state")),
                 log_path=tmp_path / "archive.log")
    try:
        wait_for_port(port, timeout=60, process=proc)
        assert cli.main(["triage", "--archive", f"http://127.0.0.1:{port}", "--token-file", str(token_file),
                         "--json"]) == 1  # a failure found
        verdict = json.loads(capsys.readouterr().out)["verdict"]
        assert (verdict["category"], verdict["ranks"]) == ("CUDA OOM", [5])
        wrong = tmp_path / "wrong-token"
        wrong.write_text("not-the-token\n")
        assert cli.main(["triage", "--archive", f"http://127.0.0.1:{port}", "--token-file", str(wrong)]) == 2
    finally:
        stop(proc)
