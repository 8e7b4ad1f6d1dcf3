"""`ranklog demo` runs the whole pipeline, names rank 5, and leaves no process behind."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers.procs import ranklog_cmd


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{entry.name}: {cmdline[:200]}")
    return found


@pytest.mark.slow
def test_demo_names_rank_5_within_a_minute_and_stops_everything(tmp_path):
    workdir = tmp_path / "demo"
    started = time.monotonic()
    out = subprocess.run(ranklog_cmd("demo", "--workdir", str(workdir)), capture_output=True, text=True, timeout=60,
                         env={**os.environ, "COLUMNS": "160"})
    elapsed = time.monotonic() - started
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert elapsed < 60
    text = out.stdout
    assert "ROOT CAUSE: rank 5 on node1: CUDA OOM" in text
    assert "torch.OutOfMemoryError: CUDA out of memory" in text
    assert "names rank 5, as planted" in text
    # The other 15 ranks' timeouts were collapsed, and came from all four nodes and layouts.
    assert "ranks 0-4,6-15" in text
    for node in ("node0", "node1", "node2", "node3"):
        assert node in text
    # The queries and the integrity check ran.
    assert "ranklog query --archive" in text and "ranklog integrity --archive" in text
    assert "OK:" in text
    report = workdir / "report.html"
    assert report.stat().st_size > 10_000
    assert "Root cause: rank 5 on node1: CUDA OOM" in report.read_text()
    # Nothing the demo started is still running (agents, archive, nodes, ranks all mention the workdir).
    deadline = time.monotonic() + 5
    while _processes_mentioning(str(workdir)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_mentioning(str(workdir)) == []
