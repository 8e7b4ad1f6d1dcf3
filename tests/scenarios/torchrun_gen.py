"""Run real ``torchrun`` jobs (torch's CPU build, gloo) with a fault injected, for the scenario generators.

Each node is one torchrun agent in namespaces of its own (:mod:`.nodes`) with its own host name, so
two agents on this machine are two nodes as far as torch is concerned (the c10d rendezvous orders
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
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.net import free_port
from tests.scenarios.nodes import descendants, hosts_file, on_node, shown

WORKER = Path(__file__).resolve().parent / "workers" / "torch_train.py"
CLASSES = WORKER.with_name("torch_classes.py")  # the failure classes beyond the crash, in several layouts


@dataclass
class Node:
    host: str
    clock_offset: str | None = None  # libfaketime offset, e.g. "+45s"
    tmpfs: dict[str, str] = field(default_factory=dict)  # a small disk of this node's own: path -> size


@dataclass
class NodeLoss:
    """The machine `host` dies: its launcher and every process below it are SIGKILLed at one moment, as
    soon as one of its workers' own log files (``--log-dir``) shows a line matching `when` (a regex)."""

    host: str
    when: str


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
    script: Path = WORKER  # the training script every worker runs
    # more environment for the launchers and workers; "{node_dir}" in a value is the node's out/<host>
    env: dict[str, str] = field(default_factory=dict)
    node_loss: NodeLoss | None = None


def run(job: TorchrunJob, out: Path) -> list[int]:
    """Run the job, write `out/<host>/…` (replacing what was there); the launchers' exit codes."""
    if out.exists():
        shutil.rmtree(out)
    with hosts_file([n.host for n in job.nodes]) as hosts:
        return _run(job, out, hosts)


def _run(job: TorchrunJob, out: Path, hosts: Path) -> list[int]:
    port = free_port()
    procs = []
    for node in job.nodes:
        node_dir = out / node.host
        node_dir.mkdir(parents=True)
        console = open(node_dir / "torchrun.console.log", "wb")  # noqa: SIM115 - closed below
        argv = on_node(node.host, hosts, _argv(job, node, node_dir, port), node.tmpfs)
        procs.append((subprocess.Popen(argv, stdout=console, stderr=subprocess.STDOUT, cwd=node_dir,
                                       env=_env(job, node_dir), start_new_session=True), console))
        time.sleep(0.5)  # node0 creates the rendezvous store
    if job.node_loss is not None:
        _lose_node(job, out, procs[[n.host for n in job.nodes].index(job.node_loss.host)][0])
    codes = []
    for proc, console in procs:
        try:
            codes.append(proc.wait(timeout=(job.outer_timeout or 300) + 60))  # loaded cores: restarts take minutes
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()
            console.close()
    return codes


def _lose_node(job: TorchrunJob, out: Path, launcher: subprocess.Popen, timeout: float = 300.0) -> None:
    """SIGKILL the node's whole process tree the moment a worker's file matches ``job.node_loss.when``
    (the workers' own files: the console's copy lags behind them)."""
    import re

    pattern = re.compile(job.node_loss.when, re.MULTILINE)
    deadline = time.monotonic() + timeout

    def written() -> str:
        return "".join(p.read_text(errors="replace") for p in (out / job.node_loss.host).glob("*/attempt_*/*/*.log"))

    while not pattern.search(written()):
        if time.monotonic() > deadline or launcher.poll() is not None:
            raise RuntimeError(f"{job.node_loss.host} never printed {job.node_loss.when!r}")
        time.sleep(0.01)
    for pid in descendants(launcher.pid):
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


def _argv(job: TorchrunJob, node: Node, node_dir: Path, port: int) -> list[str]:
    torchrun = [str(Path(sys.executable).with_name("torchrun")),
                "--nnodes", str(len(job.nodes)), "--nproc-per-node", str(job.nproc),
                "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", job.run_id,
                "--max-restarts", str(job.max_restarts), "--log-dir", str(node_dir), "--redirects", "3",
                "--tee", "3", str(job.script), *job.worker_args]
    if node.clock_offset:
        torchrun = ["faketime", "-f", node.clock_offset, *torchrun]
    if job.outer_timeout:
        torchrun = ["timeout", "-s", "TERM", str(job.outer_timeout), *torchrun]
    return torchrun


def _env(job: TorchrunJob, node_dir: Path) -> dict[str, str]:
    # libfaketime shifts the monotonic clock too (a constant offset: durations stay right); with
    # FAKETIME_DONT_FAKE_MONOTONIC Python's time.sleep fails with EINVAL.
    return {**os.environ, "OMP_NUM_THREADS": "1", "LOGLEVEL": job.loglevel, "PYTHONUNBUFFERED": "1",
            **{key: value.format(node_dir=node_dir) for key, value in job.env.items()}}


def command_lines(job: TorchrunJob) -> list[str]:
    """The launcher command of each node, as the README shows it."""
    def env(node: Node) -> str:
        return "".join(f"{k}={v.format(node_dir=f'out/{node.host}')} " for k, v in sorted(job.env.items())
                       if k not in ("CORPUS_TRUTH_DIR", "PYTHONPATH"))

    return [shown(node.host, _argv(job, node, Path(f"out/{node.host}"), 0)).replace("] ", f"] {env(node)}", 1)
            for node in job.nodes]
