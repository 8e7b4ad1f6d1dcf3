"""Who is writing: host, ip, pid, rank, local_rank, job and role, from the launcher's environment.

Precedence (the first variable that is set and valid wins):

* rank:       ``RANKLOG_RANK`` > ``RANK`` (torchrun, verl/Ray worker groups) > ``SLURM_PROCID``
              > ``OMPI_COMM_WORLD_RANK`` > ``PMI_RANK`` > ``PMIX_RANK``
              > ``GROUP_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK`` (torchrun without ``RANK``)
* local_rank: ``RANKLOG_LOCAL_RANK`` > ``LOCAL_RANK`` > ``SLURM_LOCALID``
              > ``OMPI_COMM_WORLD_LOCAL_RANK`` > ``MPI_LOCALRANKID`` > ``PALS_LOCAL_RANKID``
* job:        ``RANKLOG_JOB`` > ``TORCHELASTIC_RUN_ID`` > ``SLURM_JOB_ID`` > ``RAY_JOB_ID``
              > ``PBS_JOBID`` > ``LSB_JOBID`` > ``JOB_ID``
* role:       ``RANKLOG_ROLE`` > ``ROLE_NAME`` (torchrun's role)
* ip:         ``RANKLOG_HOST_IP`` > the address of the interface that routes outward (a UDP
              ``connect`` that sends no packet) > ``127.0.0.1``

torchrun's ``TORCHELASTIC_RUN_ID`` defaults to ``none`` when no ``--rdzv-id`` is given; that value
means "unknown" and is skipped. Stdlib only.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

RANK_VARS = ("RANKLOG_RANK", "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")
LOCAL_RANK_VARS = ("RANKLOG_LOCAL_RANK", "LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK",
                   "MPI_LOCALRANKID", "PALS_LOCAL_RANKID")
JOB_VARS = ("RANKLOG_JOB", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "RAY_JOB_ID", "PBS_JOBID", "LSB_JOBID", "JOB_ID")
ROLE_VARS = ("RANKLOG_ROLE", "ROLE_NAME")
_UNKNOWN_JOB_VALUES = frozenset({"", "none", "null"})


@dataclass(frozen=True)
class Identity:
    host: str
    ip: str
    pid: int
    rank: int | None = None
    local_rank: int | None = None
    job: str | None = None
    role: str | None = None

    @property
    def path_job(self) -> str:
        """The job as it appears in file paths (``nojob`` when unknown, no path separators)."""
        return safe_path_part(self.job or "nojob")

    @property
    def path_rank(self) -> str:
        return "x" if self.rank is None else str(self.rank)


def safe_path_part(text: str) -> str:
    """`text` usable as one path component: separators and NULs become ``_``, never ``.``/``..``."""
    cleaned = text.replace("/", "_").replace("\\", "_").replace("\0", "_").strip() or "_"
    return "_" if cleaned in (".", "..") else cleaned


def _first_int(env: Mapping[str, str], names: tuple[str, ...]) -> int | None:
    for name in names:
        value = env.get(name, "").strip()
        if value:
            try:
                return int(value)
            except ValueError:
                continue
    return None


def _first_text(env: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    for name in names:
        value = env.get(name, "").strip()
        if value.lower() not in _UNKNOWN_JOB_VALUES:
            return value
    return None


def rank_from_env(env: Mapping[str, str]) -> int | None:
    rank = _first_int(env, RANK_VARS)
    if rank is None:
        group, local, local_world = (_first_int(env, (n,)) for n in ("GROUP_RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"))
        if group is not None and local is not None and local_world is not None:
            rank = group * local_world + local
    return rank


def local_rank_from_env(env: Mapping[str, str]) -> int | None:
    return _first_int(env, LOCAL_RANK_VARS)


def job_from_env(env: Mapping[str, str]) -> str | None:
    return _first_text(env, JOB_VARS)


def role_from_env(env: Mapping[str, str]) -> str | None:
    return _first_text(env, ROLE_VARS)


def outward_ip(env: Mapping[str, str]) -> str:
    """This host's routable address without sending anything (see the module docstring)."""
    configured = env.get("RANKLOG_HOST_IP", "").strip()
    if configured:
        return configured
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect(("10.255.255.255", 1))  # UDP connect: picks a route, sends no packet
            return sock.getsockname()[0]
    except OSError:
        return "127.0.0.1"


def detect(env: Mapping[str, str] | None = None, job: str | None = None) -> Identity:
    """The identity of this process now (call again after fork: the pid changes)."""
    env = os.environ if env is None else env
    return Identity(
        host=socket.gethostname(),
        ip=outward_ip(env),
        pid=os.getpid(),
        rank=rank_from_env(env),
        local_rank=local_rank_from_env(env),
        job=job or job_from_env(env),
        role=role_from_env(env),
    )
