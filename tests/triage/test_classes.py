"""What the verdicts of the failure classes beyond the crash say besides the fields the accuracy table
judges, on the scenario library's real output: the lost node's ranks and last lines, the collective
the flight recorder names, the straggler's numbers, the errors a clean run got past — and that each
rule holds on its own (a run's rank files without the launcher's word; a NaN loss the launcher's
success does not clear)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ranklog.query.sources import open_source
from ranklog.triage.analyze import analyze
from ranklog.triage.gather import TriageData
from tests.scenarios.harness import ROOT, load
from tests.scenarios.library import restore_mtimes


def _triage(folder: Path):
    restore_mtimes(folder.parent)  # lines without a time take their file's mtime, which git does not keep
    return analyze(TriageData.from_source(open_source(log_dir=str(folder))))


def test_lost_node_names_the_node_its_ranks_and_their_last_lines():
    v = _triage(ROOT / "torchrun_node_lost" / "out").verdict
    assert (v.category, v.ranks, v.hosts, v.step) == ("node lost", [2, 3], ["node1"], 5)
    assert {line.rank for line in v.before} == {2, 3} and v.decisive is None
    assert any("ranks 0-1 then reported losing peers" in reason for reason in v.reasons)


def test_flight_recorder_names_the_collective_and_the_missing_rank():
    result = _triage(ROOT / "torchrun_fr_hang" / "out")
    (stuck,) = result.evidence.stuck
    assert (stuck.missing, stuck.entered, stuck.op) == ([1], [0, 2, 3], "gloo:all_reduce")
    assert stuck.last_seq[1] == stuck.seq - 1
    assert f"#{stuck.seq}" in result.verdict.summary and result.verdict.confidence == "high"


def test_flight_recorder_dumps_are_not_log_lines():
    """A dump is written when the rank is stopped, long after it went silent: it must not count as its
    last record (the silence), nor appear among its last lines."""
    result = _triage(ROOT / "torchrun_fr_hang" / "out")
    assert all("flight recorder" not in line.msg for line in result.verdict.before)
    assert result.verdict.before[-1].msg.startswith("step 3 done")


@pytest.mark.parametrize(("name", "rank", "step", "basis"), [
    ("torchrun_straggler", 2, 10, "duration field"), ("torchrun_straggler_text", 1, 8, "timing of its step lines")])
def test_straggler_numbers(name, rank, step, basis):
    result = _triage(ROOT / name / "out")
    slow = result.evidence.straggler
    assert (slow.rank, slow.first_step) == (rank, step) and basis in slow.basis
    assert 3.0 <= slow.factor <= 4.5 and slow.job_factor > 2.5  # 4x compute; the all_reduce waits for it
    assert result.exit_code == 3 and result.verdict.status == "degraded"
    series = {s["name"]: s["points"] for s in result.evidence.step_times["series"]}
    assert any(name.startswith(f"rank {rank} ") for name in list(series)[:2])


def test_healthy_runs_have_no_straggler():
    for name in ("torchrun_clean", "torchrun_noisy_clean", "ray_train_clean", "verl_clean"):
        assert _triage(ROOT / name / "out").evidence.straggler is None, name


def test_clean_noisy_run_names_what_it_got_past():
    v = _triage(ROOT / "torchrun_noisy_clean" / "out").verdict
    assert v.status == "no failure"
    assert any("went on to later steps" in reason for reason in v.reasons)


def test_errors_a_rank_got_past_are_noise_without_the_launchers_word(tmp_path):
    """Only node0's workers' own files (torchrun --log-dir: ranks 0 and 1, the bare ConnectionResetError
    traceback among them), no launcher console saying the job succeeded."""
    scenario = load(ROOT / "torchrun_noisy_clean")
    for job_dir in (scenario.out / "node0").glob("job_*"):
        shutil.copytree(job_dir, tmp_path / "node0" / job_dir.name)
    result = _triage(tmp_path)
    assert not result.evidence.launcher_succeeded
    assert result.verdict.status == "no failure", result.verdict.summary


def test_a_launchers_success_does_not_clear_a_nan_loss():
    """verl's NaN runs end 'well' as processes; a lasting cause stays a failure whatever the exit status."""
    from ranklog.triage.evidence import collect
    from ranklog.triage.gather import gather
    from ranklog.triage.verdict import decide

    restore_mtimes(ROOT / "verl_console_nan")
    data = TriageData.from_source(open_source(log_dir=str(ROOT / "verl_console_nan" / "out")))
    evidence = collect(gather(data)[0])
    evidence.launcher = [("vm", True, "Local worker group finished (WorkerState.SUCCEEDED).")]
    assert evidence.launcher_succeeded
    assert decide(evidence, data).category == "non-finite loss/gradients"


def test_ray_train_world_rank_from_its_own_logs():
    v = _triage(ROOT / "ray_train_worker_error" / "out").verdict
    assert (v.ranks, v.step) == ([2], 5)
    assert v.decisive.rank == 2 and "ValueError: batch 5" in (v.decisive.exc or v.decisive.msg)
    # the rank's own record, not the driver console's "[Rank 2 Error Snippet]" copy, dated by a line
    # the controller printed 15 s earlier
    assert "driver-console" not in v.decisive.source
