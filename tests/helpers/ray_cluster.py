"""A real Ray cluster on this machine for the Ray engine's tests and benchmark.

A head (``ray start --head``) and more node processes (``ray start --address``), every one bound to
127.0.0.1 on free ports of its own (two raylets on one machine must not share the agents' default
ports), with a short temp dir of its own. Each ``ray start --block`` runs in a process group of its
own that holds everything it started, so teardown stops exactly these processes by group and then
any straggler whose command line names this cluster's temp dir, by pid. Never ``ray stop``: it stops
every Ray on the machine, other tests' included.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.net import free_port, wait_for_port
from tests.helpers.procs import spawn, stop

HOST = "127.0.0.1"
RAY = str(Path(sys.executable).with_name("ray"))
START_TIMEOUT_S = 90.0

_NODES_SCRIPT = """
import json, sys, time, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
deadline = time.monotonic() + float(sys.argv[3])
while True:
    alive = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
    if len(alive) >= int(sys.argv[2]) or time.monotonic() > deadline:
        break
    time.sleep(0.5)
print(json.dumps(alive))
"""


@dataclass
class RayCluster:
    address: str  # the head's GCS HOST:PORT, what --ray_address / RAY_ADDRESS take
    temp_dir: Path
    node_ids: list[str] = field(default_factory=list)
    procs: list[subprocess.Popen] = field(default_factory=list)

    def logs(self) -> list[Path]:
        """Every log file the cluster's processes wrote (for checks that a secret never reached one)."""
        return [path for path in self.temp_dir.rglob("*") if path.is_file() and "logs" in path.parts]


def _node_args(cpus: int, object_store_mb: int) -> list[str]:
    ports = {"--node-manager-port", "--object-manager-port", "--dashboard-agent-listen-port",
             "--dashboard-agent-grpc-port", "--metrics-export-port", "--runtime-env-agent-port"}
    return [f"--num-cpus={cpus}", "--num-gpus=0", f"--node-ip-address={HOST}", "--disable-usage-stats",
            f"--object-store-memory={object_store_mb * 2**20}", "--block",
            *(f"{flag}={free_port()}" for flag in sorted(ports))]


def _alive_nodes(address: str, expected: int, timeout: float) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _NODES_SCRIPT, address, str(expected), str(timeout)],
                         capture_output=True, text=True, timeout=timeout + 60)
    if out.returncode != 0:
        raise RuntimeError(f"cannot list the Ray cluster's nodes: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _stragglers(temp_dir: Path) -> list[int]:
    """Pids of processes whose command line names `temp_dir` (workers a raylet left behind)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if str(temp_dir).encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@contextlib.contextmanager
def running_ray_cluster(nodes: int = 2, cpus_per_node: int = 1, object_store_mb: int = 128,
                        env: dict[str, str] | None = None) -> Iterator[RayCluster]:
    """A head plus `nodes` - 1 more nodes, `cpus_per_node` CPUs each; torn down on exit."""
    temp_dir = Path(tempfile.mkdtemp(prefix="rlray-", dir="/tmp"))  # short: Ray's unix sockets live under it
    port = free_port()
    cluster = RayCluster(f"{HOST}:{port}", temp_dir)
    env = {"RAY_USAGE_STATS_ENABLED": "0", **(env or {})}
    try:
        head = [RAY, "start", "--head", f"--port={port}", "--include-dashboard=false",
                f"--ray-client-server-port={free_port()}", f"--temp-dir={temp_dir}/head",
                *_node_args(cpus_per_node, object_store_mb)]
        cluster.procs.append(spawn(head, temp_dir / "head.out", env=env))
        wait_for_port(port, HOST, timeout=START_TIMEOUT_S, process=cluster.procs[0])
        for number in range(1, nodes):
            node = [RAY, "start", f"--address={cluster.address}", f"--temp-dir={temp_dir}/node{number}",
                    *_node_args(cpus_per_node, object_store_mb)]
            cluster.procs.append(spawn(node, temp_dir / f"node{number}.out", env=env))
        cluster.node_ids = _alive_nodes(cluster.address, nodes, START_TIMEOUT_S)
        if len(cluster.node_ids) != nodes:
            raise RuntimeError(f"{len(cluster.node_ids)} of {nodes} Ray nodes came up; see {temp_dir}/*.out")
        yield cluster
    finally:
        for proc in reversed(cluster.procs):
            stop(proc, signal.SIGTERM, timeout=20)
        deadline = time.monotonic() + 10
        while _stragglers(temp_dir) and time.monotonic() < deadline:
            time.sleep(0.5)
        for pid in _stragglers(temp_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp_dir, ignore_errors=True)
