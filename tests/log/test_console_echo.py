"""The in-process logger keeps consoles useful (ranklog.log.console): WARNING and above are echoed to
stderr by default (configurable, or off), ``install()`` never silences stdlib logging nor the user's
own console handlers (a later ``basicConfig`` included), nothing prints twice, and a real
``torchrun --tee`` shows a rank's warnings. Every case runs in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ranklog.parse.directory import read_log_dir

TORCHRUN = Path(sys.executable).with_name("torchrun")


def python(code: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("RANKLOG_")}
    environ.update(RANKLOG_LOG_DIR=str(tmp_path / "logs"), RANKLOG_JOB="echo", **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, env=environ)


def written(tmp_path: Path) -> list[str]:
    return read_log_dir(str(tmp_path / "logs")).column("msg").to_pylist()


GET_LOGGER = """
    import ranklog
    log = ranklog.get_logger("train")
    log.info("info line")
    log.warning("warning line")
    try:
        1 / 0
    except ZeroDivisionError:
        log.exception("failed step")
"""


def test_get_logger_echoes_warnings_and_above_to_stderr_by_default(tmp_path):
    proc = python(GET_LOGGER, tmp_path)
    assert proc.returncode == 0 and proc.stdout == ""
    assert "WARNING:train:warning line" in proc.stderr and "ERROR:train:failed step" in proc.stderr
    assert "ZeroDivisionError" in proc.stderr and "info line" not in proc.stderr
    assert written(tmp_path) == ["info line", "warning line", "failed step"]


@pytest.mark.parametrize(("setting", "shown"), [("off", []), ("INFO", ["info line", "warning line", "failed step"]),
                                                ("error", ["failed step"])])
def test_the_echo_level_is_configurable(setting, shown, tmp_path):
    proc = python(GET_LOGGER, tmp_path, RANKLOG_CONSOLE=setting)
    assert [line.split(":", 2)[2] for line in proc.stderr.splitlines() if line.count(":") >= 2
            and line.split(":")[1] == "train"] == shown
    assert len(written(tmp_path)) == 3  # the files are complete whatever the console shows


def test_install_keeps_stdlib_errors_on_stderr(tmp_path):
    """Before: after install() a plain `logging.error` reached no console (lastResort stops once the root
    has a handler) — kubectl logs and Ray's console went quiet."""
    proc = python("""
        import logging, ranklog
        ranklog.install()
        logging.getLogger("data").error("shard 7 is corrupt")
        logging.getLogger("data").info("not on the console")
    """, tmp_path)
    assert proc.stderr.count("shard 7 is corrupt") == 1 and "not on the console" not in proc.stderr
    assert written(tmp_path) == ["shard 7 is corrupt", "not on the console"]


@pytest.mark.parametrize("order", ["basicConfig after install", "basicConfig before install"])
def test_install_never_silences_the_users_console_handler(order, tmp_path):
    setup = ("ranklog.install()\nlogging.basicConfig(level=logging.INFO, format='USER %(message)s')"
             if order.endswith("after install") else
             "logging.basicConfig(level=logging.INFO, format='USER %(message)s')\nranklog.install()")
    proc = python("import logging, ranklog\n" + setup + """
logging.getLogger("train").info("step 3 done")
logging.getLogger("train").warning("loss spiked")
""", tmp_path)
    lines = proc.stderr.splitlines()
    assert lines == ["USER step 3 done", "USER loss spiked"], proc.stderr  # the user's format, once each
    assert written(tmp_path) == ["step 3 done", "loss spiked"]


def test_an_uncaught_exception_prints_its_traceback_once(tmp_path):
    proc = python("""
        import ranklog
        ranklog.install()
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    """, tmp_path)
    assert proc.returncode == 1 and proc.stderr.count("Traceback (most recent call last)") == 1
    table = read_log_dir(str(tmp_path / "logs"))
    assert table.column("level").to_pylist() == ["CRITICAL"] and "illegal memory access" in table.column("exc")[0].as_py()


def test_ranklog_run_does_not_capture_the_childs_echo_twice(tmp_path):
    code = "import ranklog; ranklog.get_logger('train').warning('grad norm is 1e9'); ranklog.flush()"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("RANKLOG_")}
    proc = subprocess.run([sys.executable, "-m", "ranklog", "run", "--log-dir", str(tmp_path / "logs"), "--job", "j",
                           "--", sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=environ)
    assert proc.returncode == 0, proc.stderr
    assert written(tmp_path).count("grad norm is 1e9") == 1


@pytest.mark.slow
@pytest.mark.skipif(not TORCHRUN.exists(), reason="torch (torchrun) is not installed: pip install torch")
def test_torchrun_tee_shows_each_ranks_warnings(tmp_path):
    """The real launcher: `torchrun --tee 3` copies each rank's stdout/stderr to its own console with a
    `[default0]:` prefix; a rank's ranklog warning must be among them (and in the rank's file)."""
    script = tmp_path / "train.py"
    script.write_text("import os, ranklog\nranklog.get_logger('train').warning('rank %s saw a NaN', os.environ['RANK'])\n")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("RANKLOG_")}
    environ.update(RANKLOG_LOG_DIR=str(tmp_path / "logs"), RANKLOG_JOB="tee")
    proc = subprocess.run([str(TORCHRUN), "--standalone", "--nproc-per-node", "2", "--tee", "3", "--log-dir",
                           str(tmp_path / "torchrun"), str(script)], capture_output=True, text=True, timeout=300,
                          env=environ)
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = proc.stdout + proc.stderr
    for rank in (0, 1):
        assert f"WARNING:train:rank {rank} saw a NaN" in console, console[-2000:]
    assert sorted(written(tmp_path)) == ["rank 0 saw a NaN", "rank 1 saw a NaN"]
