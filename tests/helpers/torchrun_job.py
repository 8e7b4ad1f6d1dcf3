"""A real torchrun job (torch's CPU build, gloo) running now, for tests and benchmarks that watch it live.

The worker is the scenario library's training loop (``tests/scenarios/workers/torch_train.py``) with
one fault injected (``--fault KIND --fault-rank R --fault-step S``), logging in the layout ``--layout``
names (one of the ecosystem's, tests/corpus/layouts.py). One node is one torchrun agent;
several nodes on this machine are agents in UTS/mount namespaces of their own with their own host
names (:mod:`tests.scenarios.nodes`, needs root), each writing ``<log_root>/<host>/`` — the
``--log-dir`` tree an agent on that node reads with the ``torchrun`` preset. Everything is started
in its own session and stopped by pid.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.net import free_port
from tests.helpers.procs import REPO, spawn, stop
from tests.scenarios.nodes import hosts_file, on_node
from tests.scenarios.torchrun_gen import WORKER


@dataclass
class TorchrunJob:
    log_root: Path
    run_id: str
    hosts: list[str]
    nproc: int
    worker_args: list[str]
    max_restarts: int = 0
    procs: list[subprocess.Popen] = field(default_factory=list)

    def node_dir(self, host: str) -> Path:
        return self.log_root / host

    def rank_dir(self, rank: int) -> Path:
        """Where global rank `rank` writes (node rank × nproc + local rank, nodes in host order)."""
        host, local = self.hosts[rank // self.nproc], rank % self.nproc
        return next(self.node_dir(host).glob(f"{self.run_id}_*/attempt_0")) / str(local)

    def wait(self, timeout: float) -> list[int | None]:
        codes = []
        for proc in self.procs:
            try:
                codes.append(proc.wait(timeout=timeout))
            except subprocess.TimeoutExpired:
                codes.append(None)
        return codes

    @property
    def running(self) -> bool:
        return any(proc.poll() is None for proc in self.procs)


def _argv(job: TorchrunJob, host: str, port: int) -> list[str]:
    return [str(Path(sys.executable).with_name("torchrun")), "--nnodes", str(len(job.hosts)),
            "--nproc-per-node", str(job.nproc), "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
            "--rdzv-id", job.run_id, "--max-restarts", str(job.max_restarts), "--log-dir", str(job.node_dir(host)),
            "--redirects", "3", "--tee", "3", str(WORKER), *job.worker_args]


@contextlib.contextmanager
def running_torchrun(log_root: Path, run_id: str, worker_args: list[str], nproc: int = 2,
                     hosts: list[str] | None = None, max_restarts: int = 0) -> Iterator[TorchrunJob]:
    """Start the job (one agent per host; a single host runs without namespaces); stop what is left."""
    hosts = hosts or ["node0"]
    job = TorchrunJob(log_root, run_id, hosts, nproc, worker_args, max_restarts)
    # The worker logs through tests/corpus/layouts.py: the repository must be importable.
    env = {"OMP_NUM_THREADS": "1", "LOGLEVEL": "INFO", "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "exporters"), os.environ.get("PYTHONPATH", "")])}
    port = free_port()
    with hosts_file(hosts) if len(hosts) > 1 else contextlib.nullcontext() as hosts_path:
        try:
            for host in hosts:
                job.node_dir(host).mkdir(parents=True, exist_ok=True)
                argv = _argv(job, host, port)
                if hosts_path is not None:
                    argv = on_node(host, hosts_path, argv)
                job.procs.append(spawn(argv, log_path=job.node_dir(host) / "torchrun.console.log", env=env,
                                       cwd=job.node_dir(host)))
            yield job
        finally:
            for proc in job.procs:
                if proc.poll() is None:
                    stop(proc, timeout=5)
                else:
                    stop(proc, timeout=0.1)  # closes its console file
