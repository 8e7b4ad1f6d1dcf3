"""One rank of the simulated data-parallel job: trains a small numpy model, logs in one style.

The "allreduce" is real: each rank writes its gradient for step N into a shared directory and
waits for all the others' (with a collective timeout, like NCCL's watchdog). When a rank dies, the
others time out at that step and print the NCCL watchdog messages a real job prints, then abort.

Styles (how the rank logs): ``logger`` (``ranklog.get_logger`` with structured fields), ``print``
(plain ``print`` mixed with a few ``get_logger`` records; run under ``ranklog run``), ``verl``
(verl console metrics ``step:N - key:val``, as in a Ray worker log). The failing rank raises
``torch.OutOfMemoryError: CUDA out of memory…`` from its step, uncaught.

Stdlib + numpy; torch is not needed (the exception class carries torch's name).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

FEATURES = 32
BATCH = 256


class OutOfMemoryError(RuntimeError):
    """What torch raises when the CUDA caching allocator cannot satisfy an allocation."""


OutOfMemoryError.__module__ = "torch"  # printed as torch.OutOfMemoryError, like the real one


def allocate_activations(gib: float, gpu: int, pid: int) -> None:
    """The simulated CUDA allocation of the forward pass; fails like the real allocator does."""
    capacity, in_use = 79.15, 78.08
    if gib > capacity - in_use:
        raise OutOfMemoryError(
            f"CUDA out of memory. Tried to allocate {gib:.2f} GiB. GPU {gpu} has a total capacity of {capacity} GiB "
            f"of which {capacity - in_use:.2f} GiB is free. Process {pid} has {in_use} GiB memory in use. Of the "
            "allocated memory 74.21 GiB is allocated by PyTorch, and 2.37 GiB is reserved by PyTorch but "
            "unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
            "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")


def _glog_prefix(rank: int) -> str:
    now = datetime.now(timezone.utc)
    return f"[rank{rank}]:[E{now:%m%d %H:%M:%S}.{now.microsecond:06d}000 ProcessGroupNCCL.cpp:616] "


def watchdog_abort(rank: int, seq: int, timeout_ms: int, waited_ms: int) -> None:
    """Print what ProcessGroupNCCL's watchdog prints when a collective times out, then abort."""
    work = (f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn={FEATURES}, NumelOut={FEATURES}, "
            f"Timeout(ms)={timeout_ms}) ran for {waited_ms} milliseconds before timing out.")
    prefix = _glog_prefix(rank)
    lines = [
        f"{prefix}[Rank {rank}] Watchdog caught collective operation timeout: {work}",
        f"{prefix}[PG ID 0 PG GUID 0(default_pg) Rank {rank}] Exception (either an error or timeout) detected by "
        f"watchdog at work: {seq}, last enqueued NCCL work: {seq}, last completed NCCL work: {seq - 1}.",
        f"{prefix}[Rank {rank}] To avoid data inconsistency, we are taking the entire process down.",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        f"  what():  [PG ID 0 PG GUID 0(default_pg) Rank {rank}] Process group watchdog thread terminated with "
        f"exception: [Rank {rank}] Watchdog caught collective operation timeout: {work}",
    ]
    sys.stdout.flush()
    sys.stderr.write("\n".join(lines) + "\n")
    sys.stderr.flush()
    os._exit(134)  # SIGABRT's exit status, as after std::terminate


class Collective:
    """Average a vector over all ranks through files in a shared directory (a filesystem allreduce)."""

    def __init__(self, root: Path, rank: int, world: int, timeout_s: float) -> None:
        self.root, self.rank, self.world, self.timeout_s = root, rank, world, timeout_s
        self.root.mkdir(parents=True, exist_ok=True)

    def allreduce_mean(self, seq: int, value: np.ndarray, timeout_s: float | None = None) -> np.ndarray:
        mine = self.root / f"seq{seq:06d}.rank{self.rank:05d}.npy"
        tmp = mine.with_suffix(".tmp.npy")
        np.save(tmp, value)
        os.replace(tmp, mine)
        started = time.monotonic()
        while True:
            parts = sorted(self.root.glob(f"seq{seq:06d}.rank*[0-9].npy"))
            if len(parts) >= self.world:
                return np.mean([np.load(p) for p in parts], axis=0)
            waited = time.monotonic() - started
            limit = self.timeout_s if timeout_s is None else timeout_s
            if waited > limit:
                watchdog_abort(self.rank, seq, int(limit * 1000), int(waited * 1000))
            time.sleep(0.02)


def redirect_like_ray_worker(logs: Path, job_id: str, rank: int) -> None:
    """Point fds 1 and 2 at ``worker-<worker_id>-<job_id>-<pid>.{out,err}``, as a Ray worker does,
    and write Ray's actor marker line to both."""
    worker_id = (f"{rank:04x}" + "c0ffee" * 8 + f"{os.getpid():08x}")[-56:]
    base = logs / f"worker-{worker_id}-{job_id}-{os.getpid()}"
    for fd, suffix in ((1, ".out"), (2, ".err")):
        target = os.open(f"{base}{suffix}", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(target, fd)
        os.close(target)
        os.write(fd, f":actor_name:WorkerDict_0:{rank}\n".encode())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="one rank of the ranklog demo job")
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--style", choices=("logger", "print", "verl"), required=True)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--fail-rank", type=int, default=5)
    parser.add_argument("--fail-step", type=int, default=12)
    parser.add_argument("--collective-dir", required=True)
    parser.add_argument("--timeout", type=float, default=3.0, help="collective timeout in seconds")
    parser.add_argument("--rendezvous-timeout", type=float, default=60.0,
                        help="how long to wait for every rank to start (init_process_group's timeout)")
    parser.add_argument("--no-logger", action="store_true", help="print only (no ranklog files)")
    parser.add_argument("--step-time", type=float, default=0.1)
    parser.add_argument("--rank-prefix", action="store_true", help="prefix printed lines with [rankN]: as torch does")
    parser.add_argument("--ray-logs", help="write stdout/stderr to Ray worker files in this logs/ directory")
    parser.add_argument("--ray-job", default="01000000", help="Ray job id (hex) in the worker file names")
    args = parser.parse_args(argv)
    if args.ray_logs:
        redirect_like_ray_worker(Path(args.ray_logs), args.ray_job, args.rank)
    prefix = f"[rank{args.rank}]: " if args.rank_prefix else ""

    def say(text: str) -> None:
        print(prefix + text, flush=True)

    import ranklog

    log = ranklog.get_logger("demo.train")
    rng = np.random.default_rng(1000 + args.rank)
    true_w = np.random.default_rng(0).normal(size=FEATURES)
    weights = np.zeros(FEATURES)
    collective = Collective(Path(args.collective_dir), args.rank, args.world, args.timeout)
    gpu = args.rank % 4
    hello = f"rank {args.rank}/{args.world} starting: {FEATURES} features, batch {BATCH}, gpu {gpu}"
    if args.style == "logger":
        log.info(hello, extra={"world_size": args.world, "gpu": gpu})
    else:
        say(hello)
        if not args.no_logger:
            log.info("config loaded", extra={"lr": 0.05, "batch": BATCH, "steps": args.steps})

    collective.allreduce_mean(0, np.zeros(1), timeout_s=args.rendezvous_timeout)  # rendezvous
    for step in range(1, args.steps + 1):
        started = time.perf_counter()
        x = rng.normal(size=(BATCH, FEATURES))
        y = x @ true_w + rng.normal(scale=0.1, size=BATCH)
        if args.rank == args.fail_rank and step == args.fail_step:
            allocate_activations(2.0, gpu, os.getpid())
        error = x @ weights - y
        loss = float(np.mean(error ** 2))
        grad = collective.allreduce_mean(step, 2 * x.T @ error / BATCH)
        weights -= 0.05 * grad
        time.sleep(max(0.0, args.step_time - (time.perf_counter() - started)))
        throughput = BATCH / (time.perf_counter() - started)
        if args.style == "logger":
            log.info(f"step {step} loss {loss:.4f} throughput {throughput:.1f} samples/s",
                     extra={"step": step, "loss": round(loss, 5), "throughput": round(throughput, 1)})
        elif args.style == "print":
            say(f"step {step} loss {loss:.4f} throughput {throughput:.1f} samples/s")
        else:
            say(f"step:{step} - actor/pg_loss:{loss:.4f} - perf/throughput:{throughput:.1f} - actor/lr:0.05")
    final = f"training finished after {args.steps} steps"
    if args.style == "logger":
        log.info(final)
    else:
        say(final)
    ranklog.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
