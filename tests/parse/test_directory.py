"""Reading whole raw log directories (what `query/triage --log_dir` run on)."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ranklog.errors import UserError
from ranklog.file_identity import identify, make_source_id
from ranklog.parse.directory import iter_log_dir, read_log_dir
from ranklog.record import arrow_schema
from tests.helpers.layouts import write_ranklog_tree, write_ray_session, write_torchrun_tree, write_verl_run
from tests.helpers.procs import REPO


def test_a_mixed_tree_yields_every_record_of_every_recognised_file(tmp_path: Path):
    trees = [write_ranklog_tree(tmp_path / "ranklog"), write_ranklog_tree(tmp_path / "text", text_layout=True),
             write_torchrun_tree(tmp_path / "torchrun"), write_ray_session(tmp_path / "ray"),
             write_verl_run(tmp_path / "verl")]
    (tmp_path / "ray" / "model.safetensors").write_bytes(b"\x00" * 100)  # not a log: ignored
    table = read_log_dir(str(tmp_path))
    assert table.schema == arrow_schema()
    per_source = collections.Counter(table.column("source").to_pylist())
    for tree in trees:
        for written in tree.files:
            assert per_source[str(written.path)] == written.records, written.path
    assert table.num_rows == sum(tree.expected_records() for tree in trees)


def test_failure_story_is_in_the_records(tmp_path: Path):
    tree = write_ranklog_tree(tmp_path, hosts=("node1", "node2", "node3"), ranks_per_host=2, failing_rank=3)
    table = read_log_dir(str(tmp_path))
    errors = [row for row in table.drop_columns(["ts"]).to_pylist() if row["level"] == "ERROR"]
    assert len(errors) == 6
    first = next(r for r in errors if r["exc"])
    assert first["rank"] == 3 and first["host"] == "node2" and "CUDA out of memory" in first["exc"]
    assert tree.first_failure.rank == 3
    watchdogs = [r for r in errors if "Watchdog caught collective operation timeout" in r["msg"]]
    assert sorted(r["rank"] for r in watchdogs) == [0, 1, 2, 4, 5]


def test_host_comes_from_the_layout_and_source_id_is_the_agents(tmp_path: Path):
    tree = write_torchrun_tree(tmp_path / "tr" / "node7")
    ranklog = write_ranklog_tree(tmp_path / "rl", hosts=("gpu-7",), ranks_per_host=1, failing_rank=None)
    table = read_log_dir(str(tmp_path))
    rows = table.drop_columns(["ts"]).to_pylist()
    torchrun_rows = [r for r in rows if r["format"] == "torchrun"]
    # a torchrun --log-dir in a subfolder of the directory read is a node's folder: its name is the host
    assert {r["host"] for r in torchrun_rows} == {"node7"}
    # read as the --log_dir itself, nothing names the machine
    assert set(read_log_dir(str(tmp_path / "tr" / "node7")).column("host").to_pylist()) == {"unknown"}
    assert {r["host"] for r in rows if r["format"] == "ranklog"} == {"gpu-7"}
    path = str(ranklog.files[0].path)
    fd = os.open(path, os.O_RDONLY)
    try:
        expected = make_source_id("gpu-7", identify(fd, os.fstat(fd)))
    finally:
        os.close(fd)
    assert {r["source_id"] for r in rows if r["source"] == path} == {expected}
    assert len({r["source_id"] for r in torchrun_rows}) == len([f for f in tree.files if f.format == "torchrun"])


def test_big_files_are_read_in_chunks_with_progress(tmp_path: Path, monkeypatch):
    import ranklog.parse.directory as directory

    monkeypatch.setattr(directory, "CHUNK_BYTES", 4096)
    tree = write_ranklog_tree(tmp_path, hosts=("n1",), ranks_per_host=1, steps=400, failing_rank=None)
    calls: list[tuple[int, int]] = []
    batches = list(iter_log_dir(str(tmp_path), progress=lambda done, total: calls.append((done, total))))
    assert len(batches) > 5
    assert sum(b.num_rows for b in batches) == tree.expected_records() == 400
    total = tree.files[0].path.stat().st_size
    assert calls[-1] == (total, total) and [d for d, _ in calls] == sorted(d for d, _ in calls)


@pytest.mark.parametrize("problem", ["missing", "file", "unreadable"])
def test_unusable_directory_is_one_clear_user_error(tmp_path: Path, problem):
    target = tmp_path / "logs"
    if problem == "file":
        target.write_text("x")
    elif problem == "unreadable":
        target.mkdir()
        target.chmod(0)
        if os.geteuid() == 0:  # root ignores permissions: prove it as an unprivileged user instead
            _check_as_nobody(tmp_path, target)
            return
    with pytest.raises(UserError, match=r"log directory .*logs") as info:
        list(iter_log_dir(str(target)))
    assert "\n" not in str(info.value)


def _check_as_nobody(tmp_path: Path, target: Path) -> None:
    tmp_path.chmod(0o755)
    code = ("from ranklog.errors import UserError\nfrom ranklog.parse.directory import iter_log_dir\n"
            f"try:\n    list(iter_log_dir({str(target)!r}))\nexcept UserError as exc:\n    print(exc)\n")
    try:
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, user=65534,
                                cwd="/", env={"PYTHONPATH": str(REPO / "exporters"), "PATH": "/usr/bin:/bin"})
    except PermissionError:
        pytest.skip(f"running as root, and user nobody may not run {sys.executable} to see the permission error")
    if result.returncode != 0 and not result.stdout:
        pytest.skip(f"running as root, and user nobody cannot import ranklog here: {result.stderr.strip()[-200:]}")
    assert result.stdout.strip() == f"log directory {target}: cannot read it (Permission denied)", result.stderr


def test_empty_directory_gives_an_empty_table(tmp_path: Path):
    table = read_log_dir(str(tmp_path))
    assert table.num_rows == 0 and table.schema == arrow_schema()
