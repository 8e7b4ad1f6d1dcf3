"""Defaults that connect: with no setting anywhere, the ranklog logger, ``ranklog run`` and the agent's
``ranklog`` preset use one directory (ranklog.log.log_config.default_log_dir), ``ranklog run --help``
says which, and what a training script logs out of the box is shipped. The machine's temp directory
is the test's own (``TMPDIR``), as it would be /tmp on a fresh node."""

from __future__ import annotations

import glob
import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx

from ranklog.agent.agent_config import AgentConfig
from ranklog.agent.presets import preset_sources
from tests.helpers.agent_proc import running_agent
from tests.helpers.archive_proc import running_archive
from tests.helpers.net import wait_until
from tests.helpers.procs import ranklog_cmd

TRAIN = "import ranklog; ranklog.get_logger('train').info('out of the box'); ranklog.flush()"


def fresh_env(tmp: Path) -> dict[str, str]:
    """No RANKLOG_* setting, and a temp directory of the test's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKLOG_")}
    env["TMPDIR"] = str(tmp)
    return env


def test_logger_run_and_preset_share_one_default_directory(tmp_path, monkeypatch):
    env = fresh_env(tmp_path)
    subprocess.run([sys.executable, "-c", TRAIN], env=env, check=True, timeout=60, cwd=tmp_path)
    subprocess.run(ranklog_cmd("run", "--", sys.executable, "-c", "print('from run')"), env=env, check=True,
                   timeout=60, cwd=tmp_path)
    root = tmp_path / "ranklog"
    assert stat.S_IMODE(root.stat().st_mode) == 0o1777  # any user's jobs may write there, as /tmp/ray
    written = sorted(glob.glob(f"{root}/**/*.jsonl", recursive=True))
    assert len(written) == 2 and not (tmp_path / "ranklog-logs").exists()
    for name in [k for k in os.environ if k.startswith("RANKLOG_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    cfg = AgentConfig(archive=["http://127.0.0.1:1"], token_file="t", preset=["ranklog"])
    assert cfg.ranklog_log_dir == str(root)
    matched = {path for spec in preset_sources("ranklog", cfg) for path in glob.glob(spec.glob, recursive=True)}
    assert set(written) <= matched


def test_run_help_says_where_it_writes(tmp_path):
    env = {**fresh_env(tmp_path), "COLUMNS": "1000"}  # help lines unwrapped: a path is not cut at a hyphen
    text = " ".join(subprocess.run(ranklog_cmd("run", "--help"), env=env, capture_output=True, text=True,
                                   timeout=60).stdout.split())
    assert f"Records are written under {tmp_path}/ranklog/<job>/<host>/" in text
    assert "ranklog agent --preset ranklog" in text
    env["RANKLOG_LOG_DIR"] = "/data/train-logs"
    assert "/data/train-logs/<job>/<host>/" in subprocess.run(ranklog_cmd("run", "--help"), env=env,
                                                              capture_output=True, text=True, timeout=60).stdout


def test_what_the_logger_writes_out_of_the_box_is_shipped(tmp_path, token_file):
    env = fresh_env(tmp_path)
    with running_archive(tmp_path / "archive", token_file) as archive:
        os.environ["TMPDIR"] = str(tmp_path)  # the agent (a child of this process) sees the same machine
        try:
            with running_agent([archive.url], token_file, tmp_path / "state", presets=["ranklog"]) as agent:
                subprocess.run([sys.executable, "-c", TRAIN], env=env, check=True, timeout=60, cwd=tmp_path)
                agent.wait_for(lambda m: m.value("ranklog_agent_records_shipped_total") >= 1, timeout=60,
                               what="the record shipped")
        finally:
            del os.environ["TMPDIR"]

        def count() -> int:
            return httpx.get(f"{archive.url}/v1/query", params={"contains": "out of the box", "count": "true"},
                             headers=archive.headers(), timeout=30).json()["count"]

        # acknowledged records become readable at the archive's next flush (flush_interval)
        wait_until(lambda: count() >= 1, 30, "the record readable")
        assert count() == 1
