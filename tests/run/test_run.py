"""`ranklog run` end to end: exit codes, signals, tracebacks, garbage, huge lines, flags, metrics."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.helpers.log_files import all_records, child_env, ranklog_files
from tests.helpers.net import free_port
from tests.helpers.procs import ranklog_cmd


def run_wrapped(tmp_path, code: str, *flags: str, env=None, timeout: float = 60) -> subprocess.CompletedProcess:
    script = tmp_path / "child.py"
    script.write_text(code)
    argv = ranklog_cmd("run", "--log-dir", str(tmp_path / "logs"), *flags, "--", sys.executable, str(script))
    return subprocess.run(argv, env=child_env(**(env or {})), capture_output=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(("code", "status"), [
    ("print('ok')", 0),
    ("import sys; sys.exit(3)", 3),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", 128 + 9),
])
def test_exit_status_is_the_childs(tmp_path, code, status):
    assert run_wrapped(tmp_path, code).returncode == status


def test_missing_command_and_usage_errors(tmp_path):
    missing = subprocess.run(ranklog_cmd("run", "--log-dir", str(tmp_path), "--", "no-such-binary-ranklog"),
                             env=child_env(), capture_output=True, text=True)
    assert missing.returncode == 127 and "command not found" in missing.stderr
    empty = subprocess.run(ranklog_cmd("run", "--log-dir", str(tmp_path)), env=child_env(), capture_output=True, text=True)
    assert empty.returncode == 2 and "no command given" in empty.stderr and "Traceback" not in empty.stderr
    bad = subprocess.run(ranklog_cmd("run", "--format", "xml", "--", "true"), env=child_env(), capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "format" in bad.stderr and "Traceback" not in bad.stderr


def test_records_console_tee_and_levels(tmp_path):
    code = ("import sys, logging\nprint('hello stdout')\nprint('plain stderr', file=sys.stderr)\n"
            "logging.basicConfig(level=logging.INFO)\nlogging.info('via logging')\nlogging.error('bad thing')\n")
    proc = run_wrapped(tmp_path, code, "--job", "j1", env={"RANK": "4", "LOCAL_RANK": "0"})
    assert proc.returncode == 0
    assert proc.stdout == b"hello stdout\n"
    assert proc.stderr == b"plain stderr\nINFO:root:via logging\nERROR:root:bad thing\n"
    (path,) = ranklog_files(tmp_path / "logs")
    assert path.parent.parent.name == "j1" and path.name == f"rank-4.pid-{_wrapper_pid(path)}.0000.jsonl"
    records = all_records(tmp_path / "logs")
    got = {(r["logger"], r["level"], r["msg"]) for r in records}
    assert got == {("stdout", "INFO", "hello stdout"), ("stderr", "WARNING", "plain stderr"),
                   ("stderr", "INFO", "INFO:root:via logging"), ("stderr", "ERROR", "ERROR:root:bad thing")}
    assert all(r["rank"] == 4 and r["local_rank"] == 0 and r["job"] == "j1" for r in records)
    assert len({r["pid"] for r in records}) == 1 and records[0]["pid"] != _wrapper_pid(path)
    assert sorted(r["seq"] for r in records) == [1, 2, 3, 4]


def _wrapper_pid(path) -> int:
    return int(path.name.split(".")[1].removeprefix("pid-"))


def test_traceback_is_grouped_into_one_record(tmp_path):
    code = ("import logging\nlogging.basicConfig()\n"
            "try:\n    {}['k']\nexcept KeyError:\n    logging.exception('lookup failed')\n"
            "def train():\n    raise RuntimeError('CUDA error: an illegal memory access was encountered')\n"
            "train()\n")
    proc = run_wrapped(tmp_path, code)
    assert proc.returncode == 1
    records = all_records(tmp_path / "logs")
    assert len(records) == 2, records
    handled, crash = sorted(records, key=lambda r: r["seq"])
    assert handled["level"] == "ERROR" and handled["msg"] == "ERROR:root:lookup failed"
    assert handled["exc"].endswith("KeyError: 'k'")
    assert crash["level"] == "ERROR" and crash["msg"] == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert crash["exc"].startswith("Traceback (most recent call last):") and "in train" in crash["exc"]


def test_binary_garbage_and_a_5mb_line(tmp_path):
    payload = bytes(range(256)) * 4 + b"\n" + b"A" * 5_000_000 + b"\n" + b"\xc3\x28 tail\n"
    code = ("import sys\nsys.stdout.buffer.write(" + repr(payload[:1025]) + ")\n"
            "sys.stdout.buffer.write(b'A' * 5_000_000 + b'\\n')\nsys.stdout.buffer.write(b'\\xc3\\x28 tail\\n')\n")
    proc = run_wrapped(tmp_path, code)
    assert proc.returncode == 0
    assert proc.stdout == payload  # the console copy is byte for byte what the child wrote
    records = sorted(all_records(tmp_path / "logs"), key=lambda r: r["seq"])
    huge = next(r for r in records if r["msg"].startswith("AAAA"))
    assert huge["truncated"] == 5_000_000 and len(huge["msg"]) == 1 << 20
    assert records[-1]["msg"] == "\ufffd( tail"
    assert any("\ufffd" in r["msg"] for r in records[:-2])


def test_text_format_and_reference_flag_spellings(tmp_path):
    port = free_port()
    proc = run_wrapped(tmp_path, "print('hello text')", "--log_format", "text", "--monitoring_port", str(port),
                       env={"RANK": "0"})
    assert proc.returncode == 0
    (path,) = ranklog_files(tmp_path / "logs", ".log")
    line = path.read_text().strip()
    assert " INFO stdout [rank=0 pid=" in line and line.endswith("] hello text")


def test_signal_forwarding_reaches_the_child_group_once(tmp_path, wrapped):
    code = """
        import os, signal, subprocess, sys, time
        received = []
        signal.signal(signal.SIGTERM, lambda s, f: received.append(s))
        grandchild = subprocess.Popen([sys.executable, "-c",
            "import os, signal, sys, time\\n"
            "signal.signal(signal.SIGTERM, lambda s, f: (print('grandchild got TERM', flush=True), sys.exit(0)))\\n"
            "os.write(1, b'grandchild-ready\\\\n')\\n"
            "time.sleep(60)"])
        # One write() per marker line: with PYTHONUNBUFFERED, print() writes the text and the newline
        # separately, and the SIGTERM sent as soon as the marker is seen could land in between.
        os.write(1, b"child-ready\\n")
        deadline = time.monotonic() + 30
        while not received and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)   # a duplicate forward would arrive meanwhile
        grandchild.wait(timeout=10)
        print(f"child got {len(received)} TERM", flush=True)
        sys.exit(40 + len(received))
    """
    run = wrapped(code)
    run.wait_for_line(b"child-ready", b"grandchild-ready")  # both handlers are installed
    os.kill(run.proc.pid, signal.SIGTERM)
    status = run.proc.wait(timeout=30)
    msgs = {r["msg"] for r in all_records(run_dir(run))}
    assert status == 41, (status, sorted(msgs))
    assert {"child got 1 TERM", "grandchild got TERM"} <= msgs, sorted(msgs)


def run_dir(run) -> str:
    return os.path.join(os.path.dirname(run.proc.args[run.proc.args.index("--log-dir") + 1]), "logs")


def test_sigint_interrupts_the_child_and_maps_to_130(tmp_path, wrapped):
    run = wrapped("import time\nprint('ready', flush=True)\ntime.sleep(60)\n")
    run.wait_for_line(b"ready")
    os.kill(run.proc.pid, signal.SIGINT)
    assert run.proc.wait(timeout=30) == 130
    records = all_records(run_dir(run))
    assert any(r["msg"] == "KeyboardInterrupt" and r["level"] == "ERROR" and "exc" in r for r in records)


def test_monitoring_port_serves_record_metrics(tmp_path, wrapped):
    port = free_port()
    release = tmp_path / "release"
    code = f"""
        import os, sys, time
        print("step 1")
        print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", file=sys.stderr)
        print("ERROR: something bad", flush=True)
        print("ready", flush=True)
        deadline = time.monotonic() + 30
        while not os.path.exists({str(release)!r}) and time.monotonic() < deadline:
            time.sleep(0.05)
    """
    run = wrapped(code, "--monitoring-port", str(port), "--job", "mjob", env={"RANK": "3"})
    run.wait_for_line(b"ready")
    text = ""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
        except OSError:
            time.sleep(0.1)
            continue
        if 'ranklog_log_records_total{level="INFO",rank="3",training_job="mjob"} 2.0' in text:
            break
        time.sleep(0.1)
    release.touch()
    assert run.proc.wait(timeout=30) == 0
    assert 'ranklog_log_records_total{level="INFO",rank="3",training_job="mjob"} 2.0' in text
    assert 'ranklog_log_records_total{level="ERROR",rank="3",training_job="mjob"} 1.0' in text
    assert 'ranklog_log_records_total{level="WARNING",rank="3",training_job="mjob"} 1.0' in text
    assert 'ranklog_failure_signatures_total{rank="3",signature="cuda_oom",training_job="mjob"} 1.0' in text
    assert 'ranklog_last_record_timestamp_seconds{rank="3",training_job="mjob"}' in text


@pytest.mark.slow
def test_torchrun_like_launch_each_rank_writes_its_own_files(tmp_path):
    """Four `ranklog run` processes with torchrun's environment; rank 2 crashes."""
    script = tmp_path / "train.py"
    script.write_text(
        "import os, ranklog\nlog = ranklog.get_logger('train')\nrank = int(os.environ['RANK'])\n"
        "print(f'print from rank {rank}')\nlog.info('logger from rank %d', rank, extra={'step': 1})\n"
        "if rank == 2:\n    raise SystemError('rank 2 failed')\n")
    procs = []
    for rank in range(4):
        env = child_env(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="4", LOCAL_WORLD_SIZE="4", GROUP_RANK="0",
                        TORCHELASTIC_RUN_ID="elastic-7")
        procs.append(subprocess.Popen(ranklog_cmd("run", "--log_dir", str(tmp_path / "logs"), "--", sys.executable,
                                                  str(script)), env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL))
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 1, 0]
    files = ranklog_files(tmp_path / "logs")
    assert {f.parent.parent.name for f in files} == {"elastic-7"}
    for rank in range(4):
        mine = [f for f in files if f.name.startswith(f"rank-{rank}.")]
        assert len(mine) == 2  # the wrapper's capture file and the child's own logger file
        records = [r for r in all_records(tmp_path / "logs") if r.get("rank") == rank]
        assert {r["msg"] for r in records} >= {f"print from rank {rank}", f"logger from rank {rank}"}
        assert all(r["local_rank"] == rank and r["job"] == "elastic-7" for r in records)
    crash = [r for r in all_records(tmp_path / "logs") if r.get("exc")]
    assert len(crash) == 1 and crash[0]["rank"] == 2 and crash[0]["msg"] == "SystemError: rank 2 failed"


def test_busy_monitoring_port_is_one_clear_error_and_stops_the_child(tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        started = time.monotonic()
        proc = run_wrapped(tmp_path, "import time\ntime.sleep(60)\n", "--monitoring-port", str(port), timeout=40)
    assert proc.returncode == 2 and b"cannot listen" in proc.stderr and b"Traceback" not in proc.stderr
    assert time.monotonic() - started < 30  # the child did not keep the wrapper waiting
