"""Issue 42, triage side: ``--job`` takes in only the job's records, every job of a range is judged (the
failed one first; ``report`` too), the report reads metrics logged as ``extra=`` fields, and the exit
status says what was found. The jobs are real processes logging through ``ranklog.get_logger``; the
"other run" is the real verl output of the scenario library."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.procs import REPO, ranklog_cmd
from tests.helpers.triage_exit import assert_exit
from tests.scenarios.harness import ROOT as SCENARIOS

JOB = Path(__file__).resolve().parent / "jobs" / "logger_job.py"
VERL_NAN = SCENARIOS / "verl_console_nan" / "out"


def _run_job(log_dir: Path, job: str, ranks: int, steps: int, fail: dict[int, int] | None = None) -> None:
    """`ranks` real processes of job `job` writing ranklog files under `log_dir` (rank r fails at fail[r])."""
    env = {**os.environ, "RANKLOG_LOG_DIR": str(log_dir), "RANKLOG_JOB": job,
           "PYTHONPATH": os.pathsep.join([str(REPO / "exporters"), os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, str(JOB), str(steps), *([str(fail[r])] if fail and r in fail else [])],
                              env={**env, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(ranks)})
             for r in range(ranks)]
    codes = [p.wait(timeout=120) for p in procs]
    assert codes == [1 if fail and r in fail else 0 for r in range(ranks)]


def _ranklog(*args: str) -> tuple[int, str, str]:
    done = subprocess.run(ranklog_cmd(*args), capture_output=True, text=True, timeout=300, cwd=REPO)
    return done.returncode, done.stdout, done.stderr


def _triage(*args: str) -> dict:
    """The JSON result; its exit status is checked by :func:`_exit_matches` after what the test is about."""
    code, out, err = _ranklog("triage", *args, "--json")
    assert code in (0, 1, 3), err
    result = json.loads(out)
    result["_exit"] = code
    return result


def _exit_matches(result: dict) -> None:
    assert_exit(result.pop("_exit"), result)


def _job_records(log_dir: Path, job: str) -> int:
    return sum(len(p.read_text().splitlines()) for p in (log_dir / job).rglob("*.jsonl"))


@pytest.fixture(scope="module")
def job42_beside_another_run(tmp_path_factory) -> Path:
    """A healthy job42 (4 ranks) and, on the same node, a verl run without a job id whose loss went NaN."""
    logs = tmp_path_factory.mktemp("logs")
    _run_job(logs, "job42", ranks=4, steps=20)
    other = next(VERL_NAN.iterdir())
    shutil.copytree(other, logs / "verl-run")
    return logs


def test_job_takes_in_no_record_without_a_job(job42_beside_another_run):
    logs = job42_beside_another_run
    own = _job_records(logs, "job42")
    result = _triage("--log_dir", str(logs), "--job", "job42")
    assert result["verdict"]["status"] == "no failure", result["verdict"]["summary"]
    assert result["evidence"]["records"] == own and result["evidence"]["ranks"] == 4
    assert not any(g["category"] for g in result["evidence"]["templates"])  # no "non-finite loss" from the other run
    code, out, err = _ranklog("query", "--log_dir", str(logs), "--job", "job42", "--count")
    assert code == 0 and int(out) == own, err
    _exit_matches(result)


def test_every_job_is_judged_and_the_failure_comes_first(job42_beside_another_run):
    """Without --job: job42 is healthy, the job-less verl run beside it has a NaN loss: both are judged,
    the failure first, and the exit status is 1."""
    result = _triage("--log_dir", str(job42_beside_another_run))
    judged = {(j["job"], j["status"]) for j in result["jobs_judged"]}
    assert judged == {("job42", "no failure"), (None, "failure")}
    assert result["jobs_judged"][0]["status"] == "failure"
    assert result["verdict"]["category"] == "non-finite loss/gradients"
    _exit_matches(result)


def test_report_reads_metrics_logged_as_extra_fields(job42_beside_another_run, tmp_path):
    page = tmp_path / "report.html"
    code, _, err = _ranklog("report", "--log_dir", str(job42_beside_another_run), "--job", "job42", "-o", str(page))
    assert code == 0, err
    payload = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page.read_text(), re.S)
    curves = json.loads(payload.group(1).replace("<\\/", "</"))["curves"]
    assert [step for step, _, _ in curves["loss"]] == list(range(1, 21))
    assert curves["loss"][1][1] == pytest.approx(1.0)  # step 2: loss 2.0 / 2 on every rank
    assert curves["throughput"][0][1] == pytest.approx(3101.0)


@pytest.fixture(scope="module")
def failed_then_healthy(tmp_path_factory) -> Path:
    """job41: rank 2 of 4 fails at step 6; job43 runs afterwards on the same nodes and ends well."""
    logs = tmp_path_factory.mktemp("logs")
    _run_job(logs, "job41", ranks=4, steps=10, fail={2: 6})
    _run_job(logs, "job43", ranks=4, steps=10)
    return logs


def test_a_failed_job_is_not_hidden_by_a_later_healthy_one(failed_then_healthy):
    result = _triage("--log_dir", str(failed_then_healthy))
    assert result["job"] == "job41" and result["verdict"]["status"] == "failure"
    assert result["verdict"]["ranks"] == [2] and result["verdict"]["step"] == 6
    assert [(j["job"], j["status"]) for j in result["jobs_judged"]] == [("job41", "failure"), ("job43", "no failure")]
    healthy = _triage("--log_dir", str(failed_then_healthy), "--job", "job43")
    assert healthy["verdict"]["status"] == "no failure" and healthy["jobs_judged"] == [
        {**healthy["jobs_judged"][0], "job": "job43"}]
    _exit_matches(result)
    _exit_matches(healthy)


def test_report_names_every_job_and_exits_1(failed_then_healthy, tmp_path):
    page = tmp_path / "report.html"
    code, out, err = _ranklog("report", "--log_dir", str(failed_then_healthy), "-o", str(page))
    assert code == 1, err
    assert "job41" in out and "job43" in out
    text = page.read_text()
    assert "id='jobs'" in text and "job43" in text and "Root cause" in text


def test_exit_status(failed_then_healthy, tmp_path):
    assert _ranklog("triage", "--log_dir", str(failed_then_healthy), "--job", "job43")[0] == 0
    assert _ranklog("triage", "--log_dir", str(failed_then_healthy), "--job", "job41")[0] == 1
    assert _ranklog("triage", "--log_dir", str(failed_then_healthy))[0] == 1  # the worst job decides
    assert _ranklog("triage", "--log_dir", str(failed_then_healthy), "--job", "nope")[0] == 2
    assert _ranklog("triage", "--no-such-flag")[0] == 2
    assert _ranklog("report", "--log_dir", str(failed_then_healthy), "--job", "job43",
                    "-o", str(tmp_path / "r.html"))[0] == 0
    straggler = str(SCENARIOS / "torchrun_straggler" / "out")  # degraded: a straggler, no failure
    assert _ranklog("triage", "--log_dir", straggler)[0] == 3
    assert _ranklog("report", "--log_dir", straggler, "-o", str(tmp_path / "s.html"))[0] == 3
