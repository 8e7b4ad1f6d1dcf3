"""Every field of a ranklog JSON line, the text layout and the file naming, from real processes."""

from __future__ import annotations

import re
import socket

from ranklog.log import process_identity as identity
from ranklog.record import normalize_row
from tests.helpers.log_files import all_records, ranklog_files, run_python

TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
FILE = re.compile(r"^rank-(\d+|x)\.pid-(\d+)\.(\d{4})\.(jsonl|log)$")


def test_every_field_is_written(tmp_path):
    proc = run_python("""
        ctx = ranklog.new_context("trace-from-env")
        with ranklog.trace("train_20251013_001"):
            log.info("step %d loss %.2f", 7, 0.25, extra={"step": 7, "loss": 0.25, "tags": ["a", "b"]})
        try:
            raise ValueError("bad batch")
        except ValueError:
            log.exception("failed")
        log.warning("explicit trace", extra={"trace_id": "t-explicit", "nan": float("nan")})
        log.debug("not written at INFO")
        print(os.getpid())
    """, tmp_path, env={"RANK": "5", "LOCAL_RANK": "1", "RANKLOG_JOB": "job-42", "ROLE_NAME": "trainer"})
    pid = int(proc.stdout.strip())
    files = ranklog_files(tmp_path)
    assert [f.relative_to(tmp_path).parts[:2] for f in files] == [("job-42", socket.gethostname())]
    assert files[0].name == f"rank-5.pid-{pid}.0000.jsonl"
    info, error, warning = all_records(tmp_path)

    assert list(info)[:14] == ["ts", "level", "msg", "logger", "host", "ip", "pid", "rank", "local_rank", "job",
                               "role", "trace_id", "step", "seq"]
    assert TS.match(info["ts"])
    assert info["level"] == "INFO" and info["msg"] == "step 7 loss 0.25" and info["logger"] == "test"
    assert info["host"] == socket.gethostname() and re.match(r"^\d+\.\d+\.\d+\.\d+$", info["ip"])
    assert (info["pid"], info["rank"], info["local_rank"], info["job"], info["role"]) == (pid, 5, 1, "job-42", "trainer")
    assert info["trace_id"] == "train_20251013_001" and info["step"] == 7
    assert info["loss"] == 0.25 and info["tags"] == ["a", "b"]
    assert "exc" not in info and "sample_rate" not in info

    assert error["level"] == "ERROR" and error["msg"] == "failed"
    assert error["exc"].startswith("Traceback (most recent call last):") and error["exc"].endswith("ValueError: bad batch")
    assert "trace_id" not in error and "step" not in error  # fields without a value are omitted

    assert warning["trace_id"] == "t-explicit" and warning["nan"] == "NaN"
    assert [r["seq"] for r in (info, error, warning)] == [1, 2, 3]
    # The archive's own normalisation accepts the line as is.
    row = normalize_row(info)
    assert row["rank"] == 5 and row["level"] == "INFO" and row["ts"] is not None


def test_unknown_rank_and_job_are_omitted_and_named_x_and_nojob(tmp_path):
    run_python("log.info('hello')", tmp_path)
    (path,) = ranklog_files(tmp_path)
    assert path.relative_to(tmp_path).parts[0] == "nojob"
    rank, pid, part, ext = FILE.match(path.name).groups()
    assert (rank, part, ext) == ("x", "0000", "jsonl")
    (record,) = all_records(tmp_path)
    for absent in ("rank", "local_rank", "job", "role", "trace_id", "step", "exc"):
        assert absent not in record
    assert record["pid"] == int(pid)


def test_text_format_layout(tmp_path):
    run_python("""
        with ranklog.trace("tr 1"):
            log.info("hello world", extra={"step": 3})
        try:
            1 / 0
        except ZeroDivisionError:
            log.error("math", exc_info=True)
    """, tmp_path, env={"RANKLOG_FORMAT": "text", "RANK": "2", "LOCAL_RANK": "0", "RANKLOG_JOB": "j"})
    (path,) = ranklog_files(tmp_path, ".log")
    assert path.name.endswith(".0000.log")
    lines = path.read_text().splitlines()
    first = re.match(r"^(\S+) INFO test \[rank=2 local_rank=0 pid=(\d+) seq=1 job=j trace_id=tr_1 step=3\] hello world$",
                     lines[0])
    assert first and TS.match(first.group(1))
    assert re.match(r"^\S+ ERROR test \[rank=2 local_rank=0 pid=\d+ seq=2 job=j\] math$", lines[1])
    assert lines[2] == "Traceback (most recent call last):" and lines[-1] == "ZeroDivisionError: division by zero"


def test_extra_cannot_forge_owned_fields_but_may_set_rank(tmp_path):
    run_python("log.info('x', extra={'seq': 99, 'host': 'forged', 'rank': 12, 'attrs': 1})", tmp_path)
    (record,) = all_records(tmp_path)
    assert record["seq"] == 1 and record["host"] == socket.gethostname()
    assert record["extra_seq"] == 99 and record["extra_host"] == "forged" and record["extra_attrs"] == 1
    assert record["rank"] == 12


def test_rank_and_job_precedence():
    env = {"RANK": "3", "SLURM_PROCID": "9", "OMPI_COMM_WORLD_RANK": "8", "LOCAL_RANK": "1", "SLURM_LOCALID": "7",
           "TORCHELASTIC_RUN_ID": "elastic", "SLURM_JOB_ID": "123"}
    assert identity.rank_from_env(env) == 3
    assert identity.local_rank_from_env(env) == 1
    assert identity.job_from_env(env) == "elastic"
    assert identity.job_from_env({**env, "RANKLOG_JOB": "mine"}) == "mine"
    assert identity.job_from_env({"TORCHELASTIC_RUN_ID": "none", "SLURM_JOB_ID": "123"}) == "123"
    assert identity.rank_from_env({"SLURM_PROCID": "9", "PMI_RANK": "4"}) == 9
    assert identity.rank_from_env({"GROUP_RANK": "2", "LOCAL_WORLD_SIZE": "8", "LOCAL_RANK": "3"}) == 19
    assert identity.rank_from_env({"RANK": "not-a-number", "PMI_RANK": "4"}) == 4
    assert identity.rank_from_env({}) is None and identity.job_from_env({}) is None
