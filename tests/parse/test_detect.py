"""Format recognition by name and layout, wherever the tree sits, and the non-matches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ranklog.parse import FORMATS, detect
from tests.helpers.layouts import write_ranklog_tree, write_ray_session, write_torchrun_tree, write_verl_run

WORKER_ID = "51188d9448be4664bf2ea26ac410b67acaaa970c4f31c5ad3ae776a5"


@pytest.mark.parametrize(("path", "fmt", "fields"), [
    ("/var/log/ranklog/run42/node3/rank-12.pid-777.0003.jsonl", "ranklog",
     {"rank": 12, "pid": 777, "host": "node3", "job": "run42"}),
    ("copied/nojob/gpu-a/rank-x.pid-5.0000.jsonl", "ranklog", {"pid": 5, "host": "gpu-a"}),
    ("/l/run42/node3/rank-0.pid-9.0000.log", "ranklog-text", {"rank": 0, "pid": 9, "host": "node3", "job": "run42"}),
    ("/tmp/ray/session_2026-12-02_13-00-00_1_2/logs/worker-" + WORKER_ID + "-01000000-4242.out", "ray",
     {"pid": 4242, "job": "01000000", "worker_id": WORKER_ID, "stream": "stdout"}),
    ("/home/me/copied-ray-logs/worker-" + WORKER_ID + "-ffffffff-4242.err", "ray",
     {"pid": 4242, "worker_id": WORKER_ID, "stream": "stderr"}),
    ("logs/python-core-worker-" + WORKER_ID + "_4242.log", "ray",
     {"pid": 4242, "worker_id": WORKER_ID, "ray_component": "core-worker"}),
    ("logs/python-core-driver-" + WORKER_ID + "_17.log", "ray",
     {"pid": 17, "worker_id": WORKER_ID, "ray_component": "core-driver"}),
    ("x/raylet.out", "ray", {"ray_component": "raylet"}),
    ("x/raylet.err", "ray", {"ray_component": "raylet"}),
    ("x/gcs_server.out", "ray", {"ray_component": "gcs_server"}),
    ("x/job-driver-raysubmit_Kx3bT9.log", "ray", {"job": "raysubmit_Kx3bT9", "ray_component": "job-driver"}),
    ("/tmp/ray/session_latest/logs/dashboard.log", "ray", {"ray_component": "dashboard"}),
    ("/data/tr/3f2c1a9e-7b4d_k3j2h1g0/attempt_2/5/stderr.log", "torchrun",
     {"job": "3f2c1a9e-7b4d", "local_rank": 5, "attempt": 2, "stream": "stderr"}),
    ("/tmp/torchelastic_ab12/my_run_id_x8y7z6w5/attempt_0/0/stdout.log", "torchrun",
     {"job": "my_run_id", "local_rank": 0, "attempt": 0, "stream": "stdout"}),
    ("/data/tr/3f2c1a9e-7b4d_k3j2h1g0/attempt_0/1/error.json", "torchrun-error",
     {"job": "3f2c1a9e-7b4d", "local_rank": 1, "attempt": 0}),
    ("/data/tr/run_k3j2h1g0/attempt_1/filtered_stderr.log", "torchrun", {"job": "run", "attempt": 1, "stream": "stderr"}),
    ("/exp/val_metrics.jsonl", "verl-jsonl", {}),
])
def test_layouts_are_recognised_by_path(path, fmt, fields):
    found = detect(path)
    assert found is not None and found.format == fmt and found.fields == fields
    assert found.format in FORMATS


@pytest.mark.parametrize("path", [
    "/ckpt/model.safetensors", "/x/config.json", "/x/app.log.1.gz", "/x/worker-zz-01000000-1.out.gz",
    "/x/stdout.log.bak", "/x/rank-3.pid-7.jsonl.tmp", "/x/attempt_0/0/error.json", "", "/",
])
def test_non_logs_are_not_recognised(path):
    found = detect(path)
    assert found is None or found.format in ("python", "json")  # generic names fall back, binary ones do not
    if path.endswith((".gz", ".safetensors", ".json", ".tmp", ".bak")) or path in ("", "/"):
        assert found is None


def test_generic_names_are_sniffed_from_their_first_lines(tmp_path: Path):
    cases = {
        "console.log": ("(TaskRunner pid=1) boot\n(TaskRunner pid=1) step:1 - actor/pg_loss:0.1 - perf/throughput:9\n",
                        "verl-console"),
        "service.out": ('{"time": "2026-12-02T13:04:05Z", "message": "x"}\n', "json"),
        "mine.log": ('{"ts": "2026-12-02T13:04:05Z", "level": "INFO", "msg": "x"}\n', "ranklog"),
        "train.txt": ("2026-12-02 13:04:05,001 - train - INFO - hello\n", "python"),
        "empty.err": ("", "python"),
        "events.jsonl": ('{"ts": "2026-12-02T13:04:05Z", "level": "INFO", "msg": "x"}\n', "ranklog"),
        "run.jsonl": ('{"step": 3, "data": {"a": 1}}\n', "verl-jsonl"),
        "other.ndjson": ('{"k": 1}\n', "json"),
    }
    for name, (content, fmt) in cases.items():
        (tmp_path / name).write_text(content)
        found = detect(str(tmp_path / name))
        assert found is not None and found.format == fmt, name


def test_every_file_of_every_generated_layout_is_recognised(tmp_path: Path):
    trees = [write_ranklog_tree(tmp_path / "a"), write_ranklog_tree(tmp_path / "b", text_layout=True),
             write_torchrun_tree(tmp_path / "c"), write_ray_session(tmp_path / "d"), write_verl_run(tmp_path / "e")]
    for tree in trees:
        for written in tree.files:
            found = detect(str(written.path))
            assert found is not None and found.format == written.format, written.path
            if written.rank is not None and found.format.startswith("ranklog"):
                assert found.fields["rank"] == written.rank
            if written.local_rank is not None and found.format.startswith("torchrun"):
                assert found.fields["local_rank"] == written.local_rank


def test_detect_does_not_read_files_with_specific_names(tmp_path: Path):
    path = tmp_path / "run" / "node1" / "rank-1.pid-2.0000.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"not": "ranklog"}) + "\n")
    path.chmod(0)
    assert detect(str(path)).format == "ranklog"
