"""`ranklog report` writes one self-contained HTML file whose plots render in a real browser."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers.procs import ranklog_cmd
from tests.triage.scenarios import SCENARIOS
from tests.triage.scenarios.archive import write_archive

from .chromium import CHROMIUM, dump_dom

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs the Debian chromium package (make system)")


def _report(tmp_path: Path, scenario: str) -> tuple[Path, str]:
    write_archive(SCENARIOS[scenario]().job.table(), tmp_path / "archive")
    page = tmp_path / "out" / "report.html"
    out = subprocess.run(ranklog_cmd("report", "--archive", str(tmp_path / "archive"), "-o", str(page)),
                         capture_output=True, text=True, timeout=60)
    expected = 0 if SCENARIOS[scenario]().expected.status == "no failure" else 1  # 1: a failure found
    assert out.returncode == expected, out.stderr
    return page, out.stdout


def _section(dom: str, element_id: str, next_id: str) -> str:
    """The DOM between the element with `element_id` and the one with `next_id`."""
    return dom.split(f'id="{element_id}"', 1)[1].split(f'id="{next_id}"', 1)[0]


def test_console_errors_are_detected(tmp_path):
    """The console check below can fail: a page with a script error is caught."""
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>missingFunction();</script></body></html>")
    _, console = dump_dom(page, tmp_path / "profile")
    assert any("missingFunction" in line for line in console)


def test_report_renders_every_plot_without_console_errors(tmp_path):
    page, stdout = _report(tmp_path, "oom_one_rank")
    assert "rank 5" in stdout
    raw = page.read_text()
    # Self-contained: no external scripts, styles, images or fonts.
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", raw)
    assert "@import" not in raw and "url(" not in raw
    dom, console = dump_dom(page, tmp_path / "profile")
    assert console == []
    assert 'data-rendered="true"' in dom
    plots = ("plot-timeline", "plot-volume", "plot-loss", "plot-throughput")
    for plot, following in zip(plots, (*plots[1:], "top-templates"), strict=True):
        assert "<svg" in _section(dom, plot, following), f"{plot} did not render"
    timeline = _section(dom, "plot-timeline", "plot-volume")
    assert timeline.count("<rect") >= 1  # the OOM (a cause) is a filled square
    assert timeline.count("<circle") == 15  # one hollow circle per rank that timed out
    volume = _section(dom, "plot-volume", "plot-loss")
    assert volume.count('class="series"') == 4  # one line per node
    assert "Root cause: rank 5 on node1: CUDA OOM at step 21" in dom
    assert "torch.OutOfMemoryError: CUDA out of memory" in dom


def test_report_links_templates_to_example_records(tmp_path):
    page, _ = _report(tmp_path, "oom_one_rank")
    raw = page.read_text()
    links = re.findall(r"href='#(tpl-\d+)'", raw)
    assert links
    for anchor in links:
        assert f"id='{anchor}'" in raw
    assert "ranks 0-4,6-15" in raw


def test_healthy_run_report_marks_no_failure_and_draws_curves(tmp_path):
    page, stdout = _report(tmp_path, "healthy_run")
    assert "no failure" in stdout
    dom, console = dump_dom(page, tmp_path / "profile")
    assert console == []
    loss = _section(dom, "plot-loss", "plot-throughput")
    assert '<path d="M' in loss
    assert "no errors" in _section(dom, "plot-timeline", "plot-volume")


def test_straggler_report_plots_the_slow_rank_against_the_median(tmp_path):
    """The torchrun straggler scenario's real output (rank 2, 4x from step 10): the report is degraded
    (exit 3) and plots the time per step of the median rank and of rank 2, the first slow step marked."""
    from tests.scenarios.harness import ROOT, load

    scenario = load(ROOT / "torchrun_straggler")
    page = tmp_path / "report.html"
    out = subprocess.run(ranklog_cmd("report", "--log_dir", str(scenario.out), "-o", str(page)),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 3, out.stderr  # degraded
    dom, console = dump_dom(page, tmp_path / "profile")
    assert console == []
    assert "Degraded: rank 2 on node1: straggler from step 10" in dom
    plot = _section(dom, "plot-step-times", "top-templates")
    assert plot.count('class="series"') >= 2 and "rank 2 (node1)" in plot and "median of the ranks" in plot
    assert 'class="mark"' in plot
