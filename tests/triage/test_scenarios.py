"""Every scenario of the library gets the verdict it expects, in memory and through `ranklog triage`."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from ranklog import cli
from ranklog.triage.analyze import analyze_table
from tests.helpers.procs import ranklog_cmd
from tests.helpers.triage_exit import assert_exit

from .scenarios import SCENARIOS
from .scenarios.archive import write_archive
from .scenarios.layouts import write_ranklog_files


def _check(verdict: dict, expected) -> None:
    assert verdict["status"] == expected.status, verdict["summary"]
    if expected.status == "failure":
        assert verdict["category"] == expected.category, verdict["summary"]
        assert tuple(verdict["ranks"]) == expected.ranks, verdict["summary"]
        if expected.step is not None:
            assert verdict["step"] == expected.step


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_verdict_in_memory(name):
    scenario = SCENARIOS[name]()
    result = analyze_table(scenario.job.table())
    v = result.verdict
    _check({"status": v.status, "category": v.category, "ranks": v.ranks, "step": v.step, "summary": v.summary},
           scenario.expected)
    if v.status == "failure":
        assert v.confidence in ("high", "medium", "low")
        assert v.reasons


def _triage_json(capsys, *args: str) -> dict:
    """`ranklog triage … --json` through the real CLI entry point, in this process."""
    code = cli.main(["triage", *args, "--json"])
    result = json.loads(capsys.readouterr().out)
    assert_exit(code, result)
    return result


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_verdict_from_archive_via_cli(name, tmp_path, capsys):
    scenario = SCENARIOS[name]()
    write_archive(scenario.job.table(), tmp_path / "archive")
    result = _triage_json(capsys, "--archive", str(tmp_path / "archive"))
    _check(result["verdict"], scenario.expected)
    assert result["job"] == scenario.job.name


def test_oom_verdict_shows_traceback_and_lines_before():
    result = analyze_table(SCENARIOS["oom_one_rank"]().job.table())
    decisive = result.verdict.decisive
    assert decisive is not None and decisive.rank == 5
    assert "Traceback (most recent call last)" in (decisive.exc or "")
    assert [line.step for line in result.verdict.before][-3:] == [18, 19, 20]
    assert all(line.rank == 5 and line.ts <= decisive.ts for line in result.verdict.before)


def test_oom_evidence_collapses_timeouts_into_one_template():
    result = analyze_table(SCENARIOS["oom_one_rank"]().job.table())
    timeouts = [g for g in result.evidence.templates if g.signature == "nccl_timeout"]
    assert len(timeouts) == 1
    assert timeouts[0].ranks == [r for r in range(16) if r != 5]
    assert "SeqNum=<n>" in timeouts[0].template
    assert result.evidence.seqnums.majority == 4821
    assert result.evidence.seqnums.absent == [5]
    first = result.evidence.timeline[0]
    assert (first.rank, first.category) == (5, "CUDA OOM")


def test_clock_skew_is_estimated_and_corrected():
    result = analyze_table(SCENARIOS["clock_skew"]().job.table())
    offsets = {host: round(ns / 1e9) for host, ns in result.evidence.offsets.items()}
    assert offsets == {"node2": -720, "node3": 240}
    # In raw time node2's timeouts come before the OOM; corrected, the OOM is first.
    raw_first = min(result.evidence.incidents, key=lambda inc: inc.line.ts)
    assert raw_first.host == "node2"
    assert result.evidence.timeline[0].rank == 5


def test_hang_names_the_silent_rank_and_its_last_lines():
    result = analyze_table(SCENARIOS["hang_one_rank"]().job.table())
    assert [s.process.rank for s in result.evidence.silent] == [6]
    assert result.verdict.before and result.verdict.before[-1].step == 30


def test_ray_oom_kill_is_attributed_to_the_killed_workers_rank():
    result = analyze_table(SCENARIOS["ray_oom_killer"]().job.table())
    assert result.verdict.ranks == [3]
    assert result.verdict.decisive.rank is None  # written by the driver, about rank 3
    assert "Task was killed due to the node running low on memory" in result.verdict.decisive.msg


def test_job_selection(tmp_path, capsys):
    import pyarrow as pa

    healthy = SCENARIOS["healthy_run"]().job.table()
    oom = SCENARIOS["oom_one_rank"]().job.table()
    # The OOM job ran an hour later than the healthy one.
    later = pa.compute.add(oom["ts"], pa.scalar(3600 * 10**6, pa.duration("us")))
    oom = oom.set_column(oom.schema.get_field_index("ts"), oom.schema.field("ts"), later)
    write_archive(pa.concat_tables([healthy, oom]), tmp_path / "a")
    result = _triage_json(capsys, "--archive", str(tmp_path / "a"))
    assert result["job"] == "oom-one-rank" and "2 jobs" in result["evidence"]["notes"][0]
    assert result["verdict"]["ranks"] == [5]
    chosen = _triage_json(capsys, "--archive", str(tmp_path / "a"), "--job", "healthy")
    assert chosen["verdict"]["status"] == "no failure"
    missing = subprocess.run(ranklog_cmd("triage", "--archive", str(tmp_path / "a"), "--job", "nope"),
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "job 'nope' not found" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_terminal_output_puts_the_verdict_first(tmp_path):
    write_archive(SCENARIOS["oom_one_rank"]().job.table(), tmp_path / "a")
    out = subprocess.run(ranklog_cmd("triage", "--archive", str(tmp_path / "a")), capture_output=True, text=True,
                         timeout=60, env={"COLUMNS": "160", "PATH": "/usr/bin:/bin",
                                                 "PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    assert out.returncode == 1, out.stderr  # a failure found
    lines = out.stdout.splitlines()
    assert "ROOT CAUSE: rank 5 on node1: CUDA OOM" in "\n".join(lines[:3])
    assert "ranks 0-4,6-15" in out.stdout


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_verdict_from_ranklog_files_via_log_dir(name, tmp_path, capsys):
    """The same scenarios written as the ranklog logger's files, read by the parsers (--log_dir)."""
    scenario = SCENARIOS[name]()
    assert write_ranklog_files(scenario.job, tmp_path / "logs")
    result = _triage_json(capsys, "--log_dir", str(tmp_path / "logs"))
    _check(result["verdict"], scenario.expected)


def test_log_text_is_never_taken_for_terminal_markup():
    """Log lines full of brackets ("[/pytorch/…/pair.cc:534]") print as they are."""
    from io import StringIO

    from rich.console import Console

    from ranklog.triage.present import render

    from .scenarios.builder import Job

    job = Job("markup", nodes=1, ranks_per_node=2)
    job.start()
    job.train(1, 3)
    text = "RuntimeError: [/pytorch/third_party/gloo/transport/tcp/pair.cc:534] [bold]Connection closed by peer"
    job.emit(1, 10.0, text, level="ERROR", exc="Traceback (most recent call last):\n" + text)
    out = StringIO()
    render(analyze_table(job.table()), Console(file=out, width=200))
    assert "[/pytorch/third_party/gloo/transport/tcp/pair.cc:534] [bold]Connection closed by peer" in out.getvalue()


def test_time_selection_and_empty_data(tmp_path, capsys):
    write_archive(SCENARIOS["oom_one_rank"]().job.table(), tmp_path / "a")
    archive = str(tmp_path / "a")
    # Only the first seconds of the job: training had not failed yet.
    early = _triage_json(capsys, "--archive", archive, "--start", "2026-12-02 12:00:00", "--end", "2026-12-02 12:00:10")
    assert early["verdict"]["status"] == "no failure" and early["evidence"]["ranks"] == 16
    # From the OOM on: the verdict is the same.
    late = _triage_json(capsys, "--archive", archive, "--start", "2026-12-02T12:00:40Z")
    assert late["verdict"]["ranks"] == [5]
    (tmp_path / "empty").mkdir()
    empty = _triage_json(capsys, "--archive", str(tmp_path / "empty"))
    assert empty["verdict"]["status"] == "no data"
