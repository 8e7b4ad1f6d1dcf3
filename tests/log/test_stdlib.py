"""Stdlib integration (install, dictConfig, JsonFormatter, excepthook) and configuration sources."""

from __future__ import annotations

import json

import pytest

from ranklog.errors import ConfigError
from ranklog.log.log_config import resolve
from tests.helpers.log_files import all_records, ranklog_files, run_python


def test_install_captures_third_party_loggers_and_warnings(tmp_path):
    run_python("""
        logging.basicConfig(level=logging.WARNING)   # the user's console handler stays
        ranklog.install()
        logging.getLogger("urllib3.connectionpool").info("third party %s", "info")
        logging.getLogger("x").debug("below the level")
        import warnings
        warnings.warn("deprecated thing")
        log.info("fast path still written once")
    """, tmp_path)
    records = all_records(tmp_path)
    by_msg = {r["msg"]: r for r in records}
    assert by_msg["third party info"]["logger"] == "urllib3.connectionpool"
    assert "below the level" not in by_msg
    assert any(r["logger"] == "py.warnings" and "deprecated thing" in r["msg"] for r in records)
    assert [r["msg"] for r in records].count("fast path still written once") == 1
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))


def test_uncaught_exception_is_logged_with_traceback(tmp_path):
    proc = run_python("""
        ranklog.install()
        log.info("about to fail")
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    """, tmp_path, check=False)
    assert proc.returncode == 1 and "RuntimeError" in proc.stderr  # the interpreter still reports it
    records = all_records(tmp_path)
    crash = records[-1]
    assert crash["level"] == "CRITICAL" and "illegal memory access" in crash["msg"]
    assert crash["exc"].endswith("RuntimeError: CUDA error: an illegal memory access was encountered")


def test_uncaught_exception_in_a_thread_is_logged(tmp_path):
    run_python("""
        import threading
        ranklog.install()
        t = threading.Thread(target=lambda: 1 / 0, name="loader")
        t.start(); t.join()
    """, tmp_path)
    (record,) = all_records(tmp_path)
    assert record["level"] == "CRITICAL" and "in thread loader" in record["msg"] and "ZeroDivisionError" in record["exc"]


def test_dictconfig_handler_and_json_formatter(tmp_path):
    proc = run_python(f"""
        import logging.config
        logging.config.dictConfig({{
            "version": 1,
            "formatters": {{"json": {{"()": "ranklog.JsonFormatter"}}}},
            "handlers": {{
                "ranklog": {{"class": "ranklog.RanklogHandler", "level": "INFO", "log_dir": {str(tmp_path)!r},
                             "job": "dict-job"}},
                "stdout": {{"class": "logging.StreamHandler", "stream": "ext://sys.stdout", "formatter": "json"}},
            }},
            "root": {{"level": "INFO", "handlers": ["ranklog", "stdout"]}},
        }})
        logging.getLogger("app").info("hello %d", 1, extra={{"step": 4}})
        logging.getLogger("app").info("again")
    """, env={"RANK": "0"})
    (record, again) = all_records(tmp_path)
    assert again["msg"] == "again" and again["seq"] == 2
    assert record["job"] == "dict-job" and record["msg"] == "hello 1" and record["step"] == 4
    printed = [json.loads(line) for line in proc.stdout.splitlines()]
    assert printed[0]["msg"] == "hello 1" and printed[0]["rank"] == 0 and printed[0]["step"] == 4
    assert [p["seq"] for p in printed] == [1, 2]


def test_disabled_loggers_behave_like_stdlib(tmp_path):
    proc = run_python("""
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(funcName)s %(message)s")
        def user_function():
            log.info("plain %s", "output")
        user_function()
        ranklog.install()
    """, tmp_path, env={"RANKLOG_ENABLED": "false"})
    assert "INFO test user_function plain output" in proc.stderr  # caller attribution is the user's
    assert ranklog_files(tmp_path) == []


def test_logger_level_and_configure_at_runtime(tmp_path):
    run_python(f"""
        log.setLevel(logging.ERROR)
        log.warning("suppressed by the logger level")
        log.error("kept")
        other = ranklog.get_logger("other")
        other.debug("suppressed by the config level")
        ranklog.configure(level="DEBUG", log_dir={str(tmp_path / "second")!r})
        other.debug("kept after reconfigure")
        assert other.isEnabledFor(logging.DEBUG) and not log.isEnabledFor(logging.WARNING)
    """, tmp_path)
    assert [r["msg"] for r in all_records(tmp_path / "nojob")] == ["kept"]
    assert [r["msg"] for r in all_records(tmp_path / "second")] == ["kept after reconfigure"]


def test_config_sources_precedence_and_errors(tmp_path):
    block = {"logging": {"level": "warn", "format": "text", "rotation": "10MB", "retention": "2d", "log_dir": "/a"}}
    config = resolve(block, env={"RANKLOG_LOG_DIR": "/from-env", "RANKLOG_LEVEL": "debug"}, log_dir="/from-code")
    assert (config.level, config.format, config.rotation, config.retention) == ("DEBUG", "text", 10_000_000, 172800.0)
    assert config.log_dir == "/from-code"
    assert resolve(block, env={"RANKLOG_LOG_DIR": "/from-env"}).log_dir == "/from-env"
    yaml_file = tmp_path / "train.yaml"
    yaml_file.write_text("logging:\n  enabled: false\n  level: ERROR\n")
    assert resolve(str(yaml_file), env={}).enabled is False
    with pytest.raises(ConfigError, match=r"logging\.rotaton: unknown key"):
        resolve({"rotaton": "1GB"}, env={})
    with pytest.raises(ConfigError, match=r"logging\.format"):
        resolve({"format": "xml"}, env={})
    with pytest.raises(ConfigError, match=r"logging\.rotation"):
        resolve({}, env={"RANKLOG_ROTATION": "big"})
