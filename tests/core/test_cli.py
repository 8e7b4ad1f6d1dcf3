"""The entry point: help, version, unknown commands, one-line errors."""

from __future__ import annotations

import subprocess
import sys

from ranklog.cli import COMMANDS


def ranklog(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ranklog", *args], capture_output=True, text=True, timeout=60)


def test_help_lists_every_command():
    out = ranklog("--help")
    assert out.returncode == 0
    for name in COMMANDS:
        assert f"  {name}" in out.stdout


def test_version_and_unknown_command():
    assert ranklog("--version").stdout.startswith("ranklog ")
    out = ranklog("frobnicate")
    assert out.returncode == 2 and "unknown command 'frobnicate'" in out.stderr and "Traceback" not in out.stderr


def test_every_command_has_help():
    for name in COMMANDS:
        out = ranklog(name, "--help")
        assert out.returncode == 0, (name, out.stderr)
        assert "usage:" in out.stdout


def test_no_arguments_prints_usage_and_fails():
    out = ranklog()
    assert out.returncode == 2 and "commands:" in out.stdout
