"""Huge results stream: exporting far more NDJSON than the process's memory, at a flat peak RSS."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ranklog.record import ts_ns
from tests.helpers.corpus import generate
from tests.helpers.procs import REPO
from tests.helpers.query_data import write_archive

pytestmark = pytest.mark.slow
ROWS = 900_000  # an answer well above the process's fixed RSS (its imports: ~270 MiB)


def _peak_rss_of(args: list[str]) -> int:
    """Run `ranklog ARGS` in a fresh child and return that child's peak RSS in bytes."""
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the (large) forking test process.
    code = ("import sys\nfrom ranklog.cli import main\nrc = main(sys.argv[1:])\n"
            "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]\n"
            "print(int(hwm) * 1024, file=sys.stderr)\nsys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stderr.strip().splitlines()[-1])


def _export(archive: Path, out: Path, *extra: str) -> tuple[int, int]:
    peak = _peak_rss_of(["query", "--archive", str(archive), "--output", str(out), *extra])
    return peak, out.stat().st_size


def test_export_streams_with_bounded_memory(tmp_path: Path):
    """Peak memory does not grow with the size of the result, and stays below the output's size."""
    archive = tmp_path / "archive"
    table = generate(ROWS, span_s=48 * 3600, hosts=8, ranks_per_host=8, seed=9)
    write_archive(table, archive)
    quarter_end = int(ts_ns(table["ts"])[ROWS // 4])
    del table
    small_peak, small_size = _export(archive, tmp_path / "quarter.ndjson", "--end", str(quarter_end / 1e9))
    peak, size = _export(archive, tmp_path / "all.ndjson")
    with open(tmp_path / "all.ndjson", "rb") as handle:
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 24), b""))
    assert lines == ROWS
    print(f"output {small_size >> 20} MiB -> peak RSS {small_peak >> 20} MiB; {size >> 20} MiB -> {peak >> 20} MiB")
    assert size > 300 << 20 and size > 1.2 * peak
    assert peak - small_peak < 0.15 * (size - small_size), "memory grew with the size of the result"
