"""Shipping over HTTPS to the real archive: verified with the configured CA, refused without it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.agent.writer import line
from tests.helpers.agent_proc import running_agent
from tests.helpers.archive_proc import running_archive

pytestmark = pytest.mark.slow


def _self_signed(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "archive.crt", directory / "archive.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def test_tls_with_the_configured_ca_and_refusal_without(tmp_path: Path, token_file: Path) -> None:
    cert, key = _self_signed(tmp_path)
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.jsonl").write_bytes(b"".join(line(i) for i in range(200)))
    with running_archive(tmp_path / "archive", token_file, scheme="https", ca_file=str(cert),
                         extra_args=["--tls-cert", str(cert), "--tls-key", str(key)]) as archive:
        assert archive.url.startswith("https://")
        with running_agent([archive.url], token_file, tmp_path / "untrusting", sources=[f"{logs}/*.jsonl"]) as agent:
            scrape = agent.wait_for(lambda s: s.value("ranklog_agent_ship_failures_total", reason="tls") >= 1)
            assert scrape.value("ranklog_agent_records_shipped_total") == 0
        with running_agent([archive.url], token_file, tmp_path / "trusting", sources=[f"{logs}/*.jsonl"],
                           extra_args=["--tls-ca", str(cert)]) as agent:
            agent.wait_for(lambda s: s.value("ranklog_agent_records_shipped_total") >= 200)
