"""`ranklog check-config`: the real agent and archive configs, loaded as the services load them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

GOOD = {
    "agent.yaml": "archive: [http://10.0.0.5:8470]\ntoken_file: /etc/ranklog/agent.token\npreset: [ranklog]\n"
                  "sources: [{glob: '/var/log/app/*.log', format: text}]\nmetrics_listen: 10.0.0.11:9465\n",
    "archive.yaml": "root: /var/lib/ranklog-archive\nlisten: 10.0.0.5:8470\ntoken_file: /etc/ranklog/archive.tokens\n"
                    "retention: {default: 30d, levels: {DEBUG: 7d}}\n",
}


def check(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("RANKLOG_AGENT_", "RANKLOG_ARCHIVE_"))}
    return subprocess.run([sys.executable, "-m", "ranklog", "check-config", *args], capture_output=True, text=True,
                          timeout=60, env={**clean, **env})


@pytest.mark.parametrize("name", sorted(GOOD))
def test_good_config_exits_0_naming_its_kind(name, tmp_path):
    path = tmp_path / name
    path.write_text(GOOD[name])
    out = check(str(path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"{path}: OK ({name.removesuffix('.yaml')} config)"


@pytest.mark.parametrize(("name", "bad", "message"), [
    ("agent.yaml", "batch_bytes: 4QB\n", "batch_bytes: not a size: '4QB'"),
    ("agent.yaml", "flush_intervall: 3s\n", "flush_intervall: unknown key"),
    ("agent.yaml", "preset: [ranklog, slurm]\n", "preset: unknown preset 'slurm'"),
    ("archive.yaml", "retention: {default: 30d, levels: {NOISE: 1d}}\n", "retention.levels: unknown level 'NOISE'"),
    ("archive.yaml", "listen: 8470\n", "listen: expected HOST:PORT"),
])
def test_bad_key_exits_2_naming_it(name, bad, message, tmp_path):
    path = tmp_path / name
    path.write_text(GOOD[name] + bad)
    out = check(str(path))
    assert out.returncode == 2
    assert out.stderr.startswith(f"ranklog check-config: error: {path}: ") and message in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_environment_is_applied_as_the_service_would(tmp_path):
    path = tmp_path / "archive.yaml"
    path.write_text(GOOD["archive.yaml"])
    out = check(str(path), RANKLOG_ARCHIVE_RETENTION__DEFAULT="soon")
    assert out.returncode == 2 and "environment RANKLOG_ARCHIVE_RETENTION__DEFAULT: retention.default" in out.stderr
    out = check(str(path), RANKLOG_ARCHIVE_LISTN="127.0.0.1:1")
    assert out.returncode == 2 and "did you mean RANKLOG_ARCHIVE_LISTEN?" in out.stderr
    assert check("--ignore-env", str(path), RANKLOG_ARCHIVE_LISTN="x").returncode == 0


def test_kind_from_section_keys_or_flag(tmp_path):
    both = tmp_path / "ranklog.yaml"
    both.write_text("agent:\n" + "".join(f"  {line}\n" for line in GOOD["agent.yaml"].splitlines()))
    assert check(str(both)).stdout.endswith("OK (agent config)\n")
    plain = tmp_path / "service.yml"
    plain.write_text(GOOD["archive.yaml"])
    assert check(str(plain)).stdout.endswith("OK (archive config)\n")
    out = check("--kind", "agent", str(plain))
    assert out.returncode == 2 and "root: unknown key" in out.stderr


@pytest.mark.parametrize(("bad", "message"), [
    ("sources: [{glob: '/data/*.log', format: verl-consol}]\n",
     "sources[0].format: unknown format 'verl-consol' (did you mean 'verl-console'?"),
    ("source: ['/data/*.log:jsn']\n", "source[0].format: unknown format 'jsn' (did you mean 'json'?"),
    ("sources: [{glob: '/data/*.log', format: text, options: {timezon: UTC}}]\n",
     "sources[0].options.timezon: unknown option (did you mean 'timezone'?"),
    ("sources: [{glob: '/data/*.log', options: {timezone: Mars/Olympus}}]\n",
     "sources[0].options.timezone: 'Mars/Olympus' is not a time zone"),
    ("sources: [{glob: '/data/*.log', format: text, options: {regex: 'step (\\d+)'}}]\n",
     "sources[0].options: the text parser refuses them: regex: 'step (\\\\d+)' has no named group"),
    ("sources: [{glob: '/data/*.log', format: json, options: {mapping: message}}]\n",
     "sources[0].options: the json parser refuses them"),
    ("sources: [{glob: 'logs/*.log'}]\n", "sources[0].glob: 'logs/*.log' is relative"),
    ("metrics_listen: 'node1:metrics'\n", "metrics_listen: 'node1:metrics' is not HOST:PORT"),
    ("rotate_grace: 2 seconds\n", "rotate_grace: not a duration"),
])
def test_values_the_agent_would_reject_once_running_fail_the_check(bad, message, tmp_path):
    """Before: a typo in a source's format passed (exit 0) and killed the agent on every node as soon as a
    file matched. The agent now skips such a source (tests/agent/test_bad_sources.py); check-config fails."""
    path = tmp_path / "agent.yaml"
    path.write_text(GOOD["agent.yaml"].replace("sources: [{glob: '/var/log/app/*.log', format: text}]\n", "") + bad)
    out = check(str(path))
    assert out.returncode == 2, out.stdout
    assert out.stderr.startswith(f"ranklog check-config: error: {path}: ") and message in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_every_bad_source_is_named_at_once(tmp_path):
    path = tmp_path / "agent.yaml"
    path.write_text(GOOD["agent.yaml"] + "source: ['/a/*.log:txt', '/b/*.log:verl-console', 'c/*.log']\n")
    out = check(str(path))
    assert out.returncode == 2 and "source[0].format: unknown format 'txt'" in out.stderr
    assert "source[2].glob: 'c/*.log' is relative" in out.stderr and "source[1]" not in out.stderr


def test_compound_durations_are_accepted(tmp_path):
    path = tmp_path / "agent.yaml"
    path.write_text(GOOD["agent.yaml"] + "shutdown_timeout: 1m30s\n")
    assert check(str(path)).returncode == 0
