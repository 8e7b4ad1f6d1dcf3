"""Agent configuration (YAML and flags) and file discovery."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ranklog.agent.agent_config import AgentConfig
from ranklog.agent.discover import Discovery
from ranklog.agent.presets import all_sources
from ranklog.commands.agent import _load, build_parser
from ranklog.errors import ConfigError


def _cfg(tmp_path: Path, *argv: str) -> AgentConfig:
    token = tmp_path / "tok"
    token.write_text("secret\nother\n")
    args = build_parser("ranklog agent").parse_args(
        ["--archive", "http://127.0.0.1:1,http://127.0.0.1:2", "--token-file", str(token),
         "--state-dir", str(tmp_path / "state"), *argv])
    return _load(args)


def test_flags_cover_the_design_contract(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, "--metrics-listen", "127.0.0.1:9999", "--preset", "ray", "--preset", "ranklog",
               "--source", "/data/*.log:python", "--source", "/x/**/*.jsonl", "--host", "node7",
               "--batch-bytes", "1MB", "--batch-latency", "100ms")
    assert cfg.archive == ["http://127.0.0.1:1", "http://127.0.0.1:2"]
    assert cfg.preset == ["ray", "ranklog"]
    assert [(s.glob, s.format) for s in cfg.sources] == [("/data/*.log", "python"), ("/x/**/*.jsonl", "auto")]
    assert (cfg.host, cfg.batch_bytes, cfg.batch_latency) == ("node7", 1_000_000, 0.1)
    assert cfg.token() == "secret"


def test_yaml_sources_with_options(tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text("agent:\n  sources:\n    - glob: /logs/*.txt\n      format: text\n"
                      "      options: {regex: '(?P<msg>.*)'}\n  max_ranks: 16\n")
    cfg = _cfg(tmp_path, "--config", str(config))
    assert cfg.sources[0].options == {"regex": "(?P<msg>.*)"} and cfg.max_ranks == 16


def test_bad_key_fails_naming_it(tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text("batch_bites: 3\n")
    with pytest.raises(ConfigError, match="batch_bites"):
        _cfg(tmp_path, "--config", str(config))
    # An unknown preset is a source the agent skips (tests/agent/test_bad_sources.py); check-config fails on it.
    assert _cfg(tmp_path, "--preset", "slurm").source_problems() == [
        ("preset:slurm", "preset: unknown preset 'slurm' (known: ranklog, ray, torchrun, verl)")]


def test_cli_error_is_one_line(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "ranklog", "agent", "--archive", "http://127.0.0.1:1",
                             "--token-file", str(tmp_path / "missing"), "--source", "/x/*.log",
                             "--state-dir", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "token_file" in result.stderr and "Traceback" not in result.stderr


def test_discovery_skips_compressed_excluded_and_state(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    (logs / "a" / "b").mkdir(parents=True)
    for name in ("app.log", "app.log.1", "app.log.2.gz", "a/b/deep.log", "a/skip.log"):
        (logs / name).write_text("x\n")
    state = logs / "state"
    state.mkdir()
    (state / "checkpoints.log").write_text("{}")
    cfg = _cfg(tmp_path, "--source", f"{logs}/**/*.log*", "--source", f"{logs}/**/*.log:python")
    cfg.sources[0].exclude = ["skip.log"]
    found = Discovery(cfg.sources, ignore_dirs=(str(state),)).scan()
    names = sorted(Path(p).relative_to(logs).as_posix() for p in found)
    assert names == ["a/b/deep.log", "a/skip.log", "app.log", "app.log.1"]
    assert found[str(logs / "a" / "skip.log")].format == "python"  # the second source still matches it


def test_presets_expand_to_their_roots(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, "--preset", "ray", "--preset", "torchrun", "--preset", "verl", "--preset", "ranklog",
               "--ray-root", "/r", "--torchrun-log-dirs", "/t1,/t2", "--ranklog-log-dir", "/rl")
    globs = [s.glob for s in all_sources(cfg)]
    assert "/r/session_*/logs/*.err" in globs
    assert "/t2/*/attempt_*/*/stderr.log" in globs and "/t1/*/attempt_*/*/error.json" in globs
    assert "/rl/**/*.jsonl" in globs
