"""The node image runs a training command whose logs reach a container of the archive image.

Both images are built from images/{node,archive}/Dockerfile on the test base image
(`--build-arg BASE_IMAGE`) with a build context laid out like the repository (dist/wheels,
images/node/), and run on the cluster's internal network. The builds start in the background with
the first rollout (conftest `image_builds`); these tests collect them.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.container.cluster import Cluster
from tests.container.conftest import Timer
from tests.container.docker_env import docker
from tests.container.image_builds import ImageBuild
from tests.helpers.procs import ranklog_cmd

pytestmark = [pytest.mark.container, pytest.mark.slow]

JOB = "image-job"


@pytest.fixture(scope="module")
def archive_container(cluster: Cluster, run_dir: Path, image_builds: dict[str, ImageBuild]) -> tuple[str, Path]:
    """A container of the archive image on the cluster network; returns (URL, token file)."""
    image = image_builds["archive"].tag()
    token = run_dir / "image-token"
    token.write_text("image-test-token-0123456789\n")
    token.chmod(0o644)  # read by the image's unprivileged uid through the bind mount
    cid = cluster.run_container("--name", f"{cluster.prefix}-archive-img", "-v",
                                f"{token}:/run/secrets/ranklog-tokens:ro", image)
    ip = docker("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", cid)
    url = f"http://{ip}:8470"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return url, token
        except httpx.HTTPError:
            pass
        time.sleep(1)
    pytest.fail(f"archive image not ready: {docker('logs', cid, check=False)[-2000:]}")


def test_node_image_ships_training_logs_to_the_archive_image(cluster: Cluster, image_builds: dict[str, ImageBuild],
                                                             archive_container) -> None:
    url, token = archive_container
    image = image_builds["node"].tag()
    script = "import sys\nfor i in range(5): print(f'step:{i} - loss:{1/(i+1):.2f}', flush=True)\n" \
             "print('RuntimeError: CUDA error: an illegal memory access was encountered', file=sys.stderr)\n" \
             "sys.exit(3)"
    with Timer("node image training run"):
        proc = subprocess.run(
            ["docker", "run", "--rm", "--network", cluster.network_id, "--hostname", "imgnode",
             "-e", f"RANKLOG_AGENT_ARCHIVE={url}", "-e", f"RANKLOG_JOB={JOB}", "-e", "RANK=0",
             "-v", f"{token}:/run/secrets/ranklog-token:ro", image, "python3", "-c", script],
            capture_output=True, text=True, timeout=300)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "step:4" in proc.stdout, "the console output must pass through unchanged"
    rows: list[dict] = []
    deadline = time.monotonic() + 30  # the archive makes ACKed records queryable within ~2 s
    while time.monotonic() < deadline and len(rows) < 6:
        query = subprocess.run(ranklog_cmd("query", "--archive", url, "--token-file", str(token), "--job", JOB,
                                           "--format", "ndjson"), capture_output=True, text=True, timeout=120)
        # exit 1 "no records matched" until the records arrive (docs/cli.md: grep's rule)
        assert query.returncode == 0 or "no records matched" in query.stderr, query.stderr
        rows = [json.loads(line) for line in query.stdout.splitlines() if line.strip()]
        time.sleep(1)
    messages = [row["msg"] for row in rows]
    assert [m for m in messages if m.startswith("step:")] == [f"step:{i} - loss:{1 / (i + 1):.2f}" for i in range(5)]
    assert any("illegal memory access" in m for m in messages)
    assert {row["host"] for row in rows} == {"imgnode"}
