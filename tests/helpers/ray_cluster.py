"""A real Ray cluster on this machine for the Ray engine's tests and benchmark.

A head (``ray start --head``) and more node processes (``ray start --address``), each with a
loopback address of its own (127.0.0.2, 127.0.0.3, …: Ray replaces 127.0.0.1 by the machine's
network address, any other 127.0.0.0/8 address it keeps, so all cluster traffic stays on loopback;
Ray has no option to bind its servers to one interface), free ports of its own (two raylets on one
machine must not share the agents' default ports) and a short temp dir of its own. Token
authentication is on, as Ray 2.60 enables it by default: the token is a file in the temp dir, and
:attr:`RayCluster.env` is what a driver process needs (``RAY_AUTH_MODE``, ``RAY_AUTH_TOKEN_PATH``). Each ``ray start --block`` runs in a process group of its
own that holds everything it started, so teardown stops exactly these processes by group and then
any straggler whose command line names this cluster's temp dir, by pid. Never ``ray stop``: it stops
every Ray on the machine, other tests' included.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
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

HEAD_IP = 2  # 127.0.0.2; further nodes 127.0.0.3, …
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
    env: dict[str, str] = field(default_factory=dict)  # what a driver needs: token auth settings
    node_ids: list[str] = field(default_factory=list)
    procs: list[subprocess.Popen] = field(default_factory=list)

    def logs(self) -> list[Path]:
        """Every log file the cluster's processes wrote (for checks that a secret never reached one)."""
        return [path for path in self.temp_dir.rglob("*") if path.is_file() and "logs" in path.parts]


def _node_args(ip: str, cpus: int, object_store_mb: int) -> list[str]:
    ports = {"--node-manager-port", "--object-manager-port", "--dashboard-agent-listen-port",
             "--dashboard-agent-grpc-port", "--metrics-export-port", "--runtime-env-agent-port"}
    return [f"--num-cpus={cpus}", "--num-gpus=0", f"--node-ip-address={ip}", "--disable-usage-stats",
            f"--object-store-memory={object_store_mb * 2**20}", "--block",
            *(f"{flag}={free_port()}" for flag in sorted(ports))]


def _alive_nodes(address: str, expected: int, timeout: float, env: dict[str, str]) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _NODES_SCRIPT, address, str(expected), str(timeout)],
                         capture_output=True, text=True, timeout=timeout + 60, env={**os.environ, **env})
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
    token = temp_dir / "auth_token"
    token.write_text(secrets.token_hex(32))
    token.chmod(0o600)
    port = free_port()
    head_ip = f"127.0.0.{HEAD_IP}"
    cluster = RayCluster(f"{head_ip}:{port}", temp_dir,
                         env={"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)})
    env = {"RAY_USAGE_STATS_ENABLED": "0", **cluster.env, **(env or {})}
    try:
        head = [RAY, "start", "--head", f"--port={port}", "--include-dashboard=false", f"--dashboard-port={free_port()}",
                f"--temp-dir={temp_dir}/head",
                *_node_args(head_ip, cpus_per_node, object_store_mb)]
        cluster.procs.append(spawn(head, temp_dir / "head.out", env=env))
        wait_for_port(port, head_ip, timeout=START_TIMEOUT_S, process=cluster.procs[0])
        for number in range(1, nodes):
            node = [RAY, "start", f"--address={cluster.address}", f"--temp-dir={temp_dir}/node{number}",
                    *_node_args(f"127.0.0.{HEAD_IP + number}", cpus_per_node, object_store_mb)]
            cluster.procs.append(spawn(node, temp_dir / f"node{number}.out", env=env))
        cluster.node_ids = _alive_nodes(cluster.address, nodes, START_TIMEOUT_S, env)
        if len(cluster.node_ids) != nodes:
            raise RuntimeError(f"{len(cluster.node_ids)} of {nodes} Ray nodes came up; see {temp_dir}/*.out")
        yield cluster
    finally:
        for proc in reversed(cluster.procs):
            stop(proc, signal.SIGTERM, timeout=5)  # GCS may not exit on SIGTERM alone: SIGKILL after
        deadline = time.monotonic() + 10
        while _stragglers(temp_dir) and time.monotonic() < deadline:
            time.sleep(0.5)
        for pid in _stragglers(temp_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp_dir, ignore_errors=True)
