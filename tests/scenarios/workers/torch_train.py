"""A small data-parallel training loop under torchrun (gloo, CPU) with one fault injected on one rank.

Run by the scenario generators as ``torchrun … torch_train.py --layout L --fault KIND --fault-rank R
--fault-step S``. It does what a real job does: a linear model, a data loader, gradients averaged with
``all_reduce`` every ``--accum`` micro-steps, log lines in the layout ``--layout`` names (one of the
ecosystem's, made by the real library: tests/corpus/layouts.py — DeepSpeed's logger, transformers'
explicit format, accelerate's logger, torch's glog formatter, loguru, structlog, …; ``legacy`` is
``%(asctime)s %(levelname)s %(name)s: %(message)s``), ``print`` lines without a time, and ``@record``
so torchelastic writes ``error.json``. Faults:

- ``exception``: an uncaught ``ValueError`` in the step (a bug in the user's code)
- ``cuda_oom``: ``torch.OutOfMemoryError`` with the CUDA allocator's text (GPU-only, so raised as a string)
- ``lag``: the rank sleeps before the collective longer than the process group timeout (others time out)
- ``hang``: the rank blocks forever in its data loader (no error anywhere; an outer timeout ends the run)
- ``sigkill``: the rank is SIGKILLed (what the kernel OOM killer does: no traceback, exit -9)
- ``restart``: fails in attempt 0 (``exception``), then a different rank fails in later attempts
- ``restart_resume``: fails in attempt 0 (``exception``); in later attempts rank 0 cannot load the
  checkpoint it resumes from, before it joins the process group (torch 2.13's gloo sometimes reads a
  peer's address left from the previous attempt and a restarted group never connects; a failure
  before the group does not depend on it)
- ``noise``: warnings, a retried-then-recovered error, deprecation notices; no failure
- ``none``: a clean run
"""

from __future__ import annotations

import argparse
import os
import signal
import time
import warnings
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

from tests.corpus.layouts import setup

CUDA_OOM = ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which "
            "1.06 GiB is free. Including non-PyTorch memory, this process has 78.08 GiB memory in use. Of the "
            "allocated memory 75.52 GiB is allocated by PyTorch, and 1.01 GiB is reserved by PyTorch but "
            "unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
            "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")

log = None  # the layout's logger, set up in main()


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layout", default="legacy", help="the logging layout (tests/corpus/layouts.py)")
    parser.add_argument("--fault", default="none")
    parser.add_argument("--fault-rank", type=int, default=1)
    parser.add_argument("--fault-step", type=int, default=3)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--accum", type=int, default=1, help="micro-steps per all_reduce")
    parser.add_argument("--step-seconds", type=float, default=0.3)
    parser.add_argument("--pg-timeout", type=float, default=600.0)
    return parser.parse_args()


class Loader:
    """The data loader: where a hang usually sits (a stuck filesystem read, a dead worker)."""

    def __init__(self, args: argparse.Namespace, rank: int) -> None:
        self.args, self.rank = args, rank
        self.gen = torch.Generator().manual_seed(rank)

    def batch(self, step: int, micro: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.args.fault == "hang" and self._hit(step) and micro == 0:
            log.info(f"loading shard {step}")
            while True:  # blocked on I/O that never returns
                time.sleep(3600)
        x = torch.randn(32, 16, generator=self.gen)
        return x, x.sum(dim=1, keepdim=True)

    def _hit(self, step: int) -> bool:
        return self.rank == self.args.fault_rank and step == self.args.fault_step


def inject(args: argparse.Namespace, rank: int, step: int) -> None:
    """The fault of this run, on the faulty rank at the faulty step (before the step's collective)."""
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if step != args.fault_step:
        return
    if args.fault == "restart_resume":
        if attempt == 0 and rank == args.fault_rank:
            raise ValueError(f"sample 1834 has 0 tokens after truncation (shard {step})")
        return
    if args.fault == "restart":
        # attempt 0: rank R hits a bad sample; later attempts: another rank fails while resuming
        if attempt == 0 and rank == args.fault_rank:
            raise ValueError(f"sample 1834 has 0 tokens after truncation (shard {step})")
        if attempt > 0 and rank == 0:
            raise RuntimeError(f"resume from checkpoint step {step - 1} failed: optimizer state mismatch")
        return
    if rank != args.fault_rank:
        return
    if args.fault == "exception":
        raise ValueError(f"sample 1834 has 0 tokens after truncation (shard {step})")
    if args.fault == "cuda_oom":
        raise torch.OutOfMemoryError(CUDA_OOM)
    if args.fault == "lag":
        log.info("evaluating on the validation set")
        time.sleep(args.pg_timeout * 3)
    if args.fault == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)


def noise(args: argparse.Namespace, rank: int, step: int) -> None:
    """Loud but harmless: what healthy runs print."""
    if args.fault != "noise":
        return
    if step == 1:
        warnings.warn("torch.cuda.amp.GradScaler(args...) is deprecated. Please use "
                      "torch.amp.GradScaler('cuda', args...) instead.", FutureWarning, stacklevel=1)
    if step == 2 and rank == args.fault_rank:
        log.error("checkpoint upload failed: ConnectionResetError: [Errno 104] Connection reset by peer; "
                  "retrying (1/3) in 0.5s")
        time.sleep(0.5)
        log.warning("checkpoint upload: retry 1/3 succeeded")
    if step == 3:
        log.warning(f"grad norm {3.7 + rank:.1f} above clip threshold 1.0, clipping")


@record
def main() -> None:
    global log
    args = parse_args()
    log = setup(args.layout)
    if args.fault == "restart_resume" and int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0 \
            and int(os.environ["RANK"]) == 0:
        raise RuntimeError(f"resume from checkpoint step {args.fault_step - 1} failed: optimizer state mismatch")
    if not dist.is_initialized():  # accelerate's PartialState may have made the group already
        dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"rank {rank}/{world} pid {os.getpid()} host {os.uname().nodename}", flush=True)
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = Loader(args, rank)
    for step in range(1, args.steps + 1):
        noise(args, rank, step)
        for micro in range(args.accum):
            x, y = loader.batch(step, micro)
            loss = torch.nn.functional.mse_loss(model(x), y) / args.accum
            loss.backward()
            log.info(f"step {step} micro {micro} loss {loss.item():.4f}")
            time.sleep(args.step_seconds)
        inject(args, rank, step)
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        optimizer.step()
        optimizer.zero_grad()
        log.info(f"step {step} done")
    print(f"rank {rank} finished {args.steps} steps", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
