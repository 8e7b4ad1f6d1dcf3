"""``ranklog query --log_dir D -f`` shows each record with its writer's identity as a query of the
same folder does: the rules of ranklog.source_identity run over everything followed so far
(ranklog.parse.follow_dir), so a Ray worker's ``.out`` takes the rank its ``.err`` names and a
torchrun rank file the global rank its launcher's console pairs with its local rank.

The folders are real runs of the scenario library, written here as a job writes them: some of its
files, a poll, then the others. The records of the second poll are what a follow shows once the whole
job has said who is who; they must carry what ``read_log_dir`` gives the same records.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from ranklog.parse.directory import read_log_dir
from ranklog.parse.follow_dir import DirectoryFollower

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
IDENTITY = ("rank", "local_rank", "role", "pid", "host")  # role third: see the comparison


def _by_key(table: pa.Table) -> dict[tuple[str, int], tuple]:
    rows = table.select(["source", "offset", *IDENTITY]).to_pylist()
    return {(row["source"], row["offset"]): tuple(row[name] for name in IDENTITY) for row in rows}


def _files(src: Path) -> list[Path]:
    return sorted(p for p in src.rglob("*") if p.is_file())


def _copy(src: Path, dst: Path, files: list[Path]) -> None:
    for path in files:
        target = dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


@pytest.mark.parametrize("first", [0, 1], ids=["even-files-first", "odd-files-first"])
@pytest.mark.parametrize("scenario", ["ray_verl_worker_group", "torchrun_hang_two_nodes", "torchrun_exception"])
def test_follow_fills_identity_from_the_whole_folder(scenario, first, tmp_path):
    src, folder = SCENARIOS / scenario / "out", tmp_path / "logs"
    files = _files(src)
    _copy(src, folder, files[first::2])
    follower = DirectoryFollower(str(folder))
    follower.poll(now=0.0)
    follower.poll(now=10.0)  # every pending record ends
    _copy(src, folder, files[1 - first::2])
    later = follower.poll(now=10.0) + follower.poll(now=20.0)
    shown = _by_key(pa.Table.from_batches(later))
    expected = _by_key(read_log_dir(str(folder)))
    assert shown and set(shown) <= set(expected)
    # rank, local rank, pid and node as the whole folder says; a role may come from a file's last
    # record, still pending (a traceback may follow) when the records before it were shown
    assert {key: value[:2] + value[3:] for key, value in shown.items()} == \
        {key: expected[key][:2] + expected[key][3:] for key in shown}
    assert all(value[2] in (None, expected[key][2]) for key, value in shown.items())
    assert any(value[0] is not None for value in shown.values())


def test_the_first_poll_is_the_folder_as_a_query_reads_it(tmp_path):
    shutil.copytree(SCENARIOS / "ray_verl_worker_group" / "out", tmp_path / "logs")
    follower = DirectoryFollower(str(tmp_path / "logs"))
    shown = _by_key(pa.Table.from_batches(follower.poll(now=0.0) + follower.poll(now=10.0)))
    assert shown == _by_key(read_log_dir(str(tmp_path / "logs")))
