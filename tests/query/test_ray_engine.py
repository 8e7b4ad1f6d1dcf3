"""``ranklog query --engine ray``: the archive scan as Ray tasks on a real Ray cluster, same answers.

The cluster is real (tests/helpers/ray_cluster.py: ``ray start --head`` plus a second node process,
one CPU each, on loopback; one per session). Every spec of the engine tests is answered by both
engines over three archives written by the archive's own writer — flush files (two per hour), compacted
hours (text index, severe-rows index) and failover duplicates from two archive ids — and the tables
must be equal: same rows, same order, same columns. The tasks must have run on both nodes. An
``s3://`` root is read by tasks that get their credentials from the driver, never from a log.
The error paths (no address, nothing listening, Ray missing) need no cluster.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from ranklog import cli
from ranklog.query import engine
from ranklog.query.filters import QuerySpec
from ranklog.query.ray_engine import RayRunner
from ranklog.query.sources import open_source
from tests.helpers.net import free_port
from tests.helpers.procs import REPO, ranklog_cmd
from tests.helpers.query_data import write_archive
from tests.helpers.s3_data import s3_filesystem
from tests.query.test_engine import _specs

SEARCH = r"WorkNCCL\(SeqNum=\d+, OpType=ALLREDUCE"


@pytest.fixture(scope="module")
def archives(parsed: pa.Table, archive_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    compacted = tmp_path_factory.mktemp("compacted")
    write_archive(parsed, compacted)
    duplicates = tmp_path_factory.mktemp("duplicates")
    write_archive(parsed, duplicates, archive_id="archive-a", files_per_hour=2)
    write_archive(parsed.slice(3000, 2500), duplicates, archive_id="archive-b")
    return {"flushes": archive_root, "compacted": compacted, "failover duplicates": duplicates}


@pytest.fixture(scope="module")
def runner(ray_cluster):
    """A driver in this process (the cluster's token settings in its environment while it lives; Ray
    reads them when it is first imported, so before that)."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in ray_cluster.env.items():
            patch.setenv(name, value)
        connected = RayRunner(ray_cluster.address)
        ray = connected.connect()
        yield connected
        ray.shutdown()


def nodes_in(stderr: str) -> set[str]:
    """The (short) node ids the engine's summary line on stderr names."""
    line = next(line for line in stderr.splitlines() if line.startswith("ray engine: "))
    return set(re.findall(r"\b([0-9a-f]{8})×\d+", line))


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(ranklog_cmd(*args), capture_output=True, text=True, timeout=300, cwd=REPO,
                          env={**os.environ, **(env or {})})


@pytest.mark.slow
@pytest.mark.parametrize("archive", ["flushes", "compacted", "failover duplicates"])
def test_every_spec_is_answered_as_the_local_engine_does(archive, archives, parsed, runner, ray_cluster):
    local = open_source(archive=str(archives[archive]))
    distributed = open_source(archive=str(archives[archive]))
    distributed.runner = runner
    specs = {**_specs(parsed), "storage order": QuerySpec(order=()), "search in storage order":
             QuerySpec(order=(), regex=SEARCH), "search newest first": QuerySpec(order=("-ts",), regex=SEARCH, limit=9)}
    before = runner.tasks
    for name, spec in specs.items():
        # Ray first: on a fresh archive its driver builds the search indexes the tasks then read.
        got = engine.read(distributed, spec)
        want = engine.read(local, spec)
        assert got.equals(want), f"{archive} / {name}: {got.num_rows} rows vs {want.num_rows} locally"
        assert engine.count(distributed, spec) == engine.count(local, spec), f"{archive} / {name}"
    assert runner.tasks - before >= len(specs)
    assert set(runner.nodes) == set(ray_cluster.node_ids), runner.summary()


@pytest.mark.slow
def test_cli_answers_and_counts_as_the_local_engine_on_both_nodes(archives, ray_cluster):
    root = str(archives["failover duplicates"])
    nodes: set[str] = set()
    for flags in (["--format", "ndjson"], ["--level", "ERROR", "--regex", SEARCH, "--format", "csv"],
                  ["--sort=-ts", "--limit", "40", "--format", "ndjson"], ["--count"]):
        local = _run("query", "--archive", root, *flags)
        distributed = _run("query", "--archive", root, *flags, "--engine", "ray", "--ray_address", ray_cluster.address,
                           env=ray_cluster.env)
        assert local.returncode == distributed.returncode == 0, distributed.stderr
        assert distributed.stdout == local.stdout and local.stdout.strip()
        nodes |= nodes_in(distributed.stderr)
    assert nodes == {node[:8] for node in ray_cluster.node_ids}  # Ray spreads; one small command may use one node
    # RAY_ADDRESS is the address when no flag names one (Ray's own convention).
    by_env = _run("query", "--archive", root, "--count", "--engine", "ray",
                  env={**ray_cluster.env, "RAY_ADDRESS": ray_cluster.address})
    assert by_env.returncode == 0 and by_env.stdout == local.stdout


@pytest.mark.slow
def test_s3_root_credentials_travel_with_the_tasks_and_never_reach_a_log(archives, seaweedfs, ray_cluster):
    """The nodes have no AWS settings at all (the cluster was started without them): the tasks read
    the bucket with what the driver resolved, and the secret shows up in no answer and no Ray log."""
    bucket = seaweedfs.new_bucket("ray")
    pafs.copy_files(str(archives["compacted"]), f"{bucket}/archive", source_filesystem=pafs.LocalFileSystem(),
                    destination_filesystem=s3_filesystem(seaweedfs))
    root, env = f"s3://{bucket}/archive", seaweedfs.env()
    for flags in (["--format", "ndjson", "--limit", "3000"], ["--regex", SEARCH, "--format", "ndjson"], ["--count"]):
        local = _run("query", "--archive", root, *flags, env=env)
        distributed = _run("query", "--archive", root, *flags, "--engine", "ray", "--ray_address", ray_cluster.address,
                           env={**env, **ray_cluster.env})
        assert local.returncode == distributed.returncode == 0, distributed.stderr
        assert distributed.stdout == local.stdout and local.stdout.strip()
        assert nodes_in(distributed.stderr)
        assert seaweedfs.secret_key not in distributed.stdout + distributed.stderr
    secret = seaweedfs.secret_key.encode()
    leaked = [str(path) for path in ray_cluster.logs() if secret in path.read_bytes()]
    assert not leaked


# -- errors: one line, exit 2, no traceback (no cluster needed) ------------------------------------------------
def test_nothing_listening_at_the_address_is_one_clear_line(archive_root, capsys, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    address = f"127.0.0.1:{free_port()}"
    assert cli.main(["query", "--archive", str(archive_root), "--count", "--engine", "ray",
                     "--ray_address", address]) == 2
    err = capsys.readouterr().err
    assert f"cannot reach the Ray cluster at {address}" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("flags", "message"), [
    (["--engine", "ray"], "--engine ray needs the cluster's address"),
    (["--engine", "ray", "--ray_address", "no-port-here"], "expected HOST:PORT"),
    (["--ray_address", "127.0.0.1:6379"], "--ray_address applies only with --engine ray"),
    (["--engine", "spark"], "invalid choice"),
])
def test_bad_engine_flags_are_one_clear_line(flags, message, archive_root, capsys, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert cli.main(["query", "--archive", str(archive_root), "--count", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_engine_ray_reads_archive_roots_only(raw_dir, capsys):
    assert cli.main(["triage", "--log_dir", str(raw_dir), "--engine", "ray", "--ray_address", "127.0.0.1:1"]) == 2
    assert "--engine ray reads an archive root" in capsys.readouterr().err


def test_without_ray_installed_the_error_names_the_extra(archive_root):
    """`ray` made unimportable the way Python documents (a None entry in sys.modules)."""
    code = ("import sys; sys.modules['ray'] = None; from ranklog import cli; "
            f"sys.exit(cli.main(['query', '--archive', {str(archive_root)!r}, '--count', '--engine', 'ray', "
            "'--ray_address', '127.0.0.1:1']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 2
    assert "pip install 'ranklog[ray]'" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""
