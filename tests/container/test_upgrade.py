"""playbooks/upgrade_agents.yml upgrades every agent, one node at a time, while jobs keep logging,
and the archive ends up with every line exactly once.

Runs last (after the hardening and listener checks): it changes the installed version.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.container.cluster import Cluster
from tests.container.conftest import TRAINING_NODES, Timer
from tests.container.docker_env import build_wheels
from tests.helpers.procs import ranklog_cmd

pytestmark = [pytest.mark.container, pytest.mark.slow]

JOB = "upgrade-drill"
NEW_VERSION = "0.1.0.post1"
# Writes numbered lines every 20 ms until /tmp/stop-writer appears (at most 10 minutes), then
# records how many it wrote.
WRITER = (
    "import os, time\n"
    "i = 0\n"
    "deadline = time.monotonic() + 600\n"
    "while not os.path.exists('/tmp/stop-writer') and time.monotonic() < deadline:\n"
    "    print(f'upgrade-line {i}', flush=True); i += 1; time.sleep(0.02)\n"
    "open('/tmp/writer-count', 'w').write(str(i))\n"
)


def _agent_pid(cluster: Cluster, name: str) -> str:
    return cluster.exec(name, "systemctl", "show", "-p", "MainPID", "--value", "ranklog-agent.service")


def _count(archive_url: str, token_file: Path, rank: int) -> int:
    proc = subprocess.run(ranklog_cmd("query", "--archive", archive_url, "--token-file", str(token_file),
                                      "--job", JOB, "--rank", str(rank), "--contains", "upgrade-line", "--count"),
                          capture_output=True, text=True, timeout=120)
    return int(proc.stdout.strip() or -1) if proc.returncode == 0 else -1


@pytest.mark.timeout(1200)
def test_rolling_upgrade_loses_no_records(cluster: Cluster, converged, run_dir: Path, archive_url: str,
                                          token_file: Path) -> None:
    wheels = build_wheels(run_dir / "wheels-upgrade", version=NEW_VERSION)
    pids_before = {name: _agent_pid(cluster, name) for name in TRAINING_NODES}
    writers = []
    for rank, name in enumerate(TRAINING_NODES):
        cluster.exec(name, "rm", "-f", "/tmp/stop-writer", "/tmp/writer-count")
        writers.append(subprocess.Popen(
            ["docker", "exec", "-e", f"RANK={rank}", "-e", f"RANKLOG_JOB={JOB}", cluster.nodes[name].container_id,
             "/opt/ranklog/bin/ranklog", "run", "--log-dir", "/var/log/ranklog", "--", "python3", "-c", WRITER],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        with Timer("upgrade_agents.yml (serial 1)"):
            run = cluster.playbook("upgrade_agents.yml", "-e", f"ranklog_version={NEW_VERSION}",
                                   "-e", f"ranklog_wheel_dir={wheels}", "-e", "ranklog_upgrade_batch=1")
    finally:
        for name in TRAINING_NODES:
            cluster.exec(name, "touch", "/tmp/stop-writer", check=False)
        for writer in writers:
            writer.wait(timeout=120)
    assert run.rc == 0, run.output[-5000:]
    for name in TRAINING_NODES:
        assert run.recap[name]["changed"] > 0, f"{name} was not upgraded"
        assert f"Version: {NEW_VERSION}" in cluster.exec(name, "/opt/ranklog/bin/pip", "show", "ranklog")
        assert _agent_pid(cluster, name) not in ("0", pids_before[name]), f"{name}: the agent was not restarted"
    plays = [line for line in run.output.splitlines() if line.startswith("PLAY [")]
    assert len(plays) == len(TRAINING_NODES), "serial: 1 must give one batch per node"

    written = {rank: int(cluster.exec(name, "cat", "/tmp/writer-count")) for rank, name in enumerate(TRAINING_NODES)}
    assert all(count > 100 for count in written.values()), written
    shipped: dict[int, int] = {}
    for _ in range(60):
        shipped = {rank: _count(archive_url, token_file, rank) for rank in written}
        if shipped == written:
            break
        time.sleep(2)
    assert shipped == written, f"archive has {shipped} lines per rank, the jobs wrote {written}"
