"""Failure signatures: the real strings that say a training run is failing, and what they mean.

Used by the agent (``ranklog_failure_signatures_total``), by ``ranklog run`` and by triage. Each
signature has a category (what triage reports) and a flag saying whether it is usually a
*consequence* of a failure elsewhere (a collective timeout is what healthy ranks print when one
peer died), which triage uses to order causes before effects.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Signature:
    name: str  # label value of ranklog_failure_signatures_total
    category: str  # triage category
    pattern: str  # regex, searched in msg + exc
    consequence: bool = False  # typically caused by another rank's failure
    priority: int = 50  # higher wins when several signatures match one record


SIGNATURES: tuple[Signature, ...] = (
    Signature("cuda_oom", "CUDA OOM",
              r"(?:torch\.)?(?:cuda\.)?OutOfMemoryError: CUDA out of memory|CUDA out of memory\. Tried to allocate|CUDA error: out of memory", priority=90),
    Signature("ray_oom_kill", "host OOM kill",
              r"(?:Task was|worker\(s\) were) killed due to the node running low on memory|Worker exit type: NODE_OUT_OF_MEMORY|Out of memory: Killed process|oom-kill|OOMKilled", priority=85),
    Signature("nonfinite_grad", "non-finite loss/gradients",
              r"grad_norm is not finite|[Gg]radient(?:s)? (?:is|are|contain) (?:not finite|NaN|inf)|non-finite (?:grad|gradient)|found (?:NaN|inf) in grad", priority=80),
    Signature("nan_loss", "non-finite loss/gradients",
              r"\bloss(?:[ =:]+| is )(?:nan|NaN|inf|-inf)\b|[Ll]oss is (?:NaN|not finite)|NaN loss|non-finite loss", priority=80),
    Signature("cuda_error", "CUDA error",
              r"RuntimeError: CUDA error:|CUDA error: (?!out of memory)|CUBLAS_STATUS_|cudaErrorIllegalAddress|an illegal memory access was encountered|device-side assert triggered", priority=75),
    Signature("nccl_error", "NCCL error",
              r"ncclRemoteError|ncclInternalError|ncclSystemError|ncclUnhandledCudaError|ncclInvalidUsage|DistBackendError|NCCL error in:|NCCL communicator was aborted", priority=60),
    Signature("nccl_timeout", "NCCL/collective timeout",
              r"Watchdog caught collective operation timeout|WorkNCCL\(SeqNum=\d+.*?ran for \d+ milliseconds before timing out|collective operation timeout|Timed out waiting .* for (?:the )?(?:store|collective)|ProcessGroupGloo.*[Tt]imed out|Socket Timeout",
              consequence=True, priority=30),
    Signature("raylet_died", "Ray actor death",
              r"[Rr]aylet (?:died|is dead|has died|process .* died)|Raylet is terminated\. Termination is unexpected|The node with node id: \S+ .* has been marked dead|GCS failed to|Raylet .* exited", consequence=True, priority=40),
    Signature("ray_actor_died", "Ray actor death",
              r"ActorDiedError|The actor died unexpectedly|RayActorError"
              r"|A worker died or was killed while executing a task", consequence=True, priority=45),
    # An actor whose constructor raised: the user's exception is the cause (the death follows from it).
    Signature("ray_creation_task_error", "uncaught exception",
              r"The actor died because of an error raised in its creation task|Exception raised in creation task",
              priority=50),
    Signature("python_exception", "uncaught exception",
              r"Traceback \(most recent call last\):|^\w+(?:\.\w+)*(?:Error|Exception): ", priority=10),
    # Added for triage (real strings from gloo, Ray's raylet, verl's console metrics, torchrun's launcher).
    Signature("gloo_timeout", "NCCL/collective timeout",
              r"Timed out waiting \d+\s*ms for (?:recv|send) operation", consequence=True, priority=30),
    Signature("collective_peer_lost", "NCCL error",
              r"Connection closed by peer|Connection reset by peer", consequence=True, priority=55),
    Signature("ray_memory_pressure", "host OOM kill",
              r"killed due to memory pressure \(OOM\)", priority=85),
    Signature("nan_metric", "non-finite loss/gradients",
              r"\b(?:[\w/]*loss|[\w/]*grad_norm)[:=]\s*(?:(?:np|numpy|torch)\.\w+\(|tensor\()?(?:nan|NaN|-?inf)\b", priority=80),
    # A worker killed by SIGKILL (the kernel OOM killer, a scheduler's hard kill): it leaves no line of
    # its own, only the launcher's report (torchrun's failure summary / "failed (exitcode: -9)").
    Signature("process_sigkilled", "killed (SIGKILL)",
              r"exitcode\s*:\s*-9\b|Signal 9 \(SIGKILL\) received by PID|failed \(exitcode: -9\)", priority=80),
    # The run was stopped from outside (an outer `timeout`, the scheduler, a user's Ctrl-C): what every
    # process prints then is a consequence; what made someone stop it is the question (often a hang).
    Signature("terminated_by_signal", "terminated by signal",
              r"SignalException: Process \d+ got signal: (?:1|2|15)\b|Received (?:1|2|15) death signal"
              r"|Signal (?:1|2|15) \(SIG(?:HUP|INT|TERM)\) received by PID|exitcode\s*:\s*-15\b",
              consequence=True, priority=35),
    Signature("launcher_child_failed", "uncaught exception",
              r"ChildFailedError|failed \(exitcode: -?\d+\) local_rank: \d+", consequence=True, priority=20),
)

_COMPILED = tuple((sig, re.compile(sig.pattern, re.MULTILINE)) for sig in SIGNATURES)
BY_NAME: dict[str, Signature] = {sig.name: sig for sig in SIGNATURES}
CATEGORIES: tuple[str, ...] = (
    "CUDA OOM", "CUDA error", "NCCL error", "NCCL/collective timeout", "Ray actor death", "host OOM kill",
    "non-finite loss/gradients", "killed (SIGKILL)", "uncaught exception", "hang/silence", "terminated by signal",
    "unknown",
)


def match(text: str | None) -> Signature | None:
    """The highest-priority signature found in `text`, or None."""
    if not text:
        return None
    best: Signature | None = None
    for sig, regex in _COMPILED:
        if (best is None or sig.priority > best.priority) and regex.search(text):
            best = sig
    return best
