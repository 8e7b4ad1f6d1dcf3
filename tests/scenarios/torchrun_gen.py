"""Run real ``torchrun`` jobs (torch's CPU build, gloo) with a fault injected, for the scenario generators.

Each node is one torchrun agent in its own UTS namespace (``unshare --uts``) with its own host name,
so two agents on this machine are two nodes as far as torch is concerned (the c10d rendezvous orders
nodes by host name, so node ranks are stable from one generation to the next). A node writes
``out/<host>/`` — its ``--log-dir`` tree (``--redirects 3 --tee 3``) and ``torchrun.console.log``, the
launcher's console as the job scheduler would capture it. A clock offset runs that node under
libfaketime (Debian ``faketime``): everything it and its workers stamp is shifted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.net import free_port

WORKER = Path(__file__).resolve().parent / "workers" / "torch_train.py"


@dataclass
class Node:
    host: str
    clock_offset: str | None = None  # libfaketime offset, e.g. "+45s"


@dataclass
class TorchrunJob:
    """One torchrun job: `nodes` agents × `nproc` workers running :data:`WORKER` with `worker_args`."""

    nodes: list[Node] = field(default_factory=lambda: [Node("node0")])
    nproc: int = 2
    worker_args: list[str] = field(default_factory=list)
    max_restarts: int = 0
    outer_timeout: float | None = None  # coreutils `timeout` SIGTERMs the launchers after this many seconds
    run_id: str = "job"
    loglevel: str = "INFO"  # torchrun's LOGLEVEL: INFO prints the rendezvous result (group_rank, ranks)


def run(job: TorchrunJob, out: Path) -> list[int]:
    """Run the job, write `out/<host>/…` (replacing what was there); the launchers' exit codes."""
    if out.exists():
        shutil.rmtree(out)
    port = free_port()
    hosts_file = Path(tempfile.mkdtemp(prefix="ranklog-scenario-")) / "hosts"
    # Each node gets a loopback address of its own, so its name is what reverse lookups give back.
    hosts_file.write_text("".join(f"127.0.1.{i + 1} {n.host}\n" for i, n in enumerate(job.nodes))
                          + "127.0.0.1 localhost\n")
    procs = []
    for node in job.nodes:
        node_dir = out / node.host
        node_dir.mkdir(parents=True)
        console = open(node_dir / "torchrun.console.log", "wb")  # noqa: SIM115 - closed below
        procs.append((subprocess.Popen(_argv(job, node, node_dir, port, hosts_file), stdout=console, stderr=subprocess.STDOUT,
                                       cwd=node_dir, env=_env(job, node), start_new_session=True), console))
        time.sleep(0.5)  # node0 creates the rendezvous store
    codes = []
    for proc, console in procs:
        try:
            codes.append(proc.wait(timeout=(job.outer_timeout or 120) + 60))
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()
            console.close()
    shutil.rmtree(hosts_file.parent, ignore_errors=True)
    return codes


def _argv(job: TorchrunJob, node: Node, node_dir: Path, port: int, hosts_file: Path) -> list[str]:
    torchrun = [str(Path(sys.executable).with_name("torchrun")),
                "--nnodes", str(len(job.nodes)), "--nproc-per-node", str(job.nproc),
                "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", job.run_id,
                "--max-restarts", str(job.max_restarts), "--log-dir", str(node_dir), "--redirects", "3",
                "--tee", "3", str(WORKER), *job.worker_args]
    if node.clock_offset:
        torchrun = ["faketime", "-f", node.clock_offset, *torchrun]
    if job.outer_timeout:
        torchrun = ["timeout", "-s", "TERM", str(job.outer_timeout), *torchrun]
    # UTS and mount namespaces of its own: the node's host name is what torch and the workers see, and
    # it resolves to loopback (torch connects to the master node by name) through a private /etc/hosts.
    script = f'mount --bind "$0" /etc/hosts && hostname {node.host} && exec "$@"'
    return ["unshare", "--uts", "--mount", "sh", "-c", script, str(hosts_file), *torchrun]


def _env(job: TorchrunJob, node: Node) -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "LOGLEVEL": job.loglevel, "PYTHONUNBUFFERED": "1"}
    if node.clock_offset:
        # Shift wall-clock time only: monotonic clocks drive timeouts and must stay real.
        env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
    return env


def command_lines(job: TorchrunJob) -> list[str]:
    """The launcher command of each node, as the README shows it (paths relative to the scenario)."""
    lines = []
    for node in job.nodes:
        argv = _argv(job, node, Path(f"out/{node.host}"), 0, Path("hosts"))
        shown = " ".join(a if "/" not in a or a.startswith("out/") else Path(a).name for a in argv[7:])
        lines.append(f"[host {node.host}] {shown}")
    return lines
