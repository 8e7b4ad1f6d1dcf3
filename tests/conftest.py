"""Fixtures every test area shares: loopback ports, token files, a scratch directory."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from tests.helpers.net import free_port
from tests.helpers.ray_cluster import running_ray_cluster
from tests.helpers.seaweedfs import SeaweedFS, running_seaweedfs


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    """A token file with one random token (mode 0600), as the agent and archive read it."""
    path = tmp_path / "tokens"
    path.write_text(secrets.token_hex(16) + "\n")
    path.chmod(0o600)
    return path


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory):
    """One real S3 server (SeaweedFS) for the whole session; tests keep apart by bucket."""
    with running_seaweedfs(tmp_path_factory.mktemp("seaweedfs")) as server:
        yield server


@pytest.fixture
def s3_root(seaweedfs: SeaweedFS) -> str:
    """A fresh, empty archive root on the session's SeaweedFS."""
    return f"s3://{seaweedfs.new_bucket()}/archive"


@pytest.fixture(scope="session")
def ray_cluster():
    """A real two-node Ray cluster (``ray start --head`` plus a second node process, one CPU each, on
    loopback) for the whole session: the Ray engine's tests share it."""
    with running_ray_cluster(nodes=2, cpus_per_node=1) as cluster:
        yield cluster

