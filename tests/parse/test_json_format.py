"""The generic `json` parser: field mapping options, Ray structured logging, common shippers."""

from __future__ import annotations

import json

import pytest

from ranklog.errors import ConfigError
from tests.parse.conftest import make_ctx, parse_whole, rows


def test_user_mapping_wins_over_defaults():
    data = b'{"time": "2026-12-02T13:04:05Z", "severity": "error", "message": "disk full", "msg": "ignored?"}\n'
    ctx = make_ctx("json", options={"mapping": {"message": "msg", "severity": "level", "time": "ts"}})
    (row,) = rows(parse_whole(data, ctx)[0])
    assert (row["msg"], row["level"]) == ("disk full", "ERROR")
    assert row["ts"] == 1_796_216_645_000_000_000
    assert json.loads(row["attrs"]) == {"msg": "ignored?"}  # the losing key is kept, not dropped


def test_ray_structured_json_logging_is_mapped():
    line = {"asctime": "2025-02-12 12:25:48,766", "levelname": "INFO", "message": "This is a Ray task",
            "filename": "test-log-config.py", "lineno": 11, "name": "__main__", "job_id": "01000000",
            "worker_id": "51188d9448be4664bf2ea26ac410b67acaaa970c4f31c5ad3ae776a5", "node_id": "f683dfbf",
            "actor_name": "WorkerDict_0:3", "task_name": "f", "timestamp_ns": 1739391948766493000}
    (row,) = rows(parse_whole((json.dumps(line) + "\n").encode(), make_ctx("json"))[0])
    assert row["ts"] == 1739391948766493000
    assert (row["level"], row["msg"], row["logger"], row["job"], row["role"]) == \
        ("INFO", "This is a Ray task", "__main__", "01000000", "WorkerDict_0:3")
    attrs = json.loads(row["attrs"])
    assert attrs["filename"] == "test-log-config.py" and attrs["lineno"] == 11 and attrs["task_name"] == "f"
    assert "message" not in attrs and "levelname" not in attrs
    assert attrs["asctime"] == "2025-02-12 12:25:48,766"  # the less precise time key is kept, not dropped


def test_asctime_alone_gives_the_time():
    data = b'{"asctime": "2025-02-12 12:25:48,766", "levelname": "WARNING", "message": "x"}\n'
    (row,) = rows(parse_whole(data, make_ctx("json"))[0])
    assert row["ts"] == 1739363148766000000 and row["level"] == "WARNING"


def test_structlog_and_docker_shapes():
    data = (b'{"event": "loaded", "level": "info", "timestamp": "2026-12-02T13:04:05.5Z"}\n'
            b'{"log": "plain stdout line\\n", "stream": "stdout", "time": "2026-12-02T13:04:06.000000001Z"}\n')
    first, second = rows(parse_whole(data, make_ctx("json"))[0])
    assert first["msg"] == "loaded" and first["ts"] == 1_796_216_645_500_000_000
    assert second["msg"] == "plain stdout line\n" and second["ts"] == 1_796_216_646_000_000_000  # stored in µs: the 1 ns is floored away
    assert json.loads(second["attrs"]) == {"stream": "stdout"}


def test_mapping_to_an_unknown_field_is_a_config_error_naming_the_key():
    with pytest.raises(ConfigError, match=r"mapping\.message"):
        parse_whole(b"{}\n", make_ctx("json", options={"mapping": {"message": "body"}}))
