"""Every benchmark still runs: each `bench_*.py` in `--quick` mode prints its table and target lines.

The figures of a quick run are not meaningful (tiny data, shared CI cores), so targets are not
judged here; `make bench` runs the full benchmarks and their PASS/FAIL lines are what count.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = sorted(Path(__file__).parent.glob("bench_*.py"))
# Smaller still where --quick does more than the smoke needs: the triage accuracy of every scenario
# is judged by tests/scenarios/test_verdicts.py on both paths; here two scenarios show the table runs.
SMOKE_ARGS = {"bench_triage_accuracy": ["--only", "torchrun_cuda_oom", "ray_train_worker_error"]}


def test_there_are_benchmarks():
    assert BENCHMARKS, "tests/benchmarks holds no bench_*.py"


@pytest.mark.slow
@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda p: p.stem)
def test_benchmark_quick_run_prints_its_table(script: Path):
    out = subprocess.run([sys.executable, str(script), "--quick", *SMOKE_ARGS.get(script.stem, [])],
                         capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).parents[2])
    assert out.returncode == 0, out.stderr[-2000:]
    assert "|" in out.stdout or "─" in out.stdout, f"no table printed:\n{out.stdout[-2000:]}"
    assert "PASS" in out.stdout or "FAIL" in out.stdout, f"no target lines printed:\n{out.stdout[-2000:]}"
