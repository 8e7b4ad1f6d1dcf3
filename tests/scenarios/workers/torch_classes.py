"""A data-parallel training loop under torchrun (gloo, CPU) for the failure classes beyond the crash.

Run by the scenario generators as ``torchrun … torch_classes.py --fault KIND --layout LAYOUT …``. Like a
real job it has a dataset behind a ``DataLoader`` (worker processes), a model whose gradients are
averaged with ``all_reduce``, checkpoints written by rank 0, and ``@record`` for torchelastic's
``error.json``. Its logging takes one of the layouts ML code really uses (``--layout``), so triage
is judged on more than one picture of a line:

- ``dashes``: ``2026-12-07 10:00:01,123 - train - INFO - msg`` (Hugging Face's example scripts)
- ``loguru``: ``2026-12-07 10:00:01.123 | INFO     | train:main:88 - msg`` (loguru's default, via logging)
- ``glog``: ``I1207 10:00:01.123000 4242 train.py:88] msg`` (absl / glog)
- ``ranklog``: ``ranklog.get_logger`` JSON files, numbers as ``extra=`` fields (the README's way)

Faults (``--fault``), each on ``--fault-rank`` at ``--fault-step``:

- ``none``: a clean run
- ``noisy``: a clean run that logs like a real one: warnings, uploads that fail with a
  ``ConnectionResetError`` traceback (a bare one on stderr, one logged at ERROR) and succeed on the
  next try, ``error_rate=0.00`` / ``timeout=1800s``
- ``disk_full``: rank 0 saves a checkpoint every ``--ckpt-every`` steps into ``--ckpt-dir`` (a tiny
  tmpfs the generator mounts): ``torch.save`` hits a real ENOSPC
- ``loader_killed``: the rank's data-loader worker is SIGKILLed while it loads the step's batch and the
  rank waits for it (what the kernel's OOM killer does to a worker whose memory grew)
- ``straggler``: from the fault step on, the rank's compute takes ``--slow-factor`` times as long;
  every rank's step follows (the all_reduce waits for it); the run ends well
- ``hang``: the rank blocks in its data loader before the step's collective; the others' collective
  times out after ``--pg-timeout`` seconds (with ``--flight-recorder``, ranklog dumps each rank's
  flight recorder)
- node loss needs nothing here: the generator kills a whole node (``node_lost``)
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
import traceback
import warnings
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record
from torch.utils.data import DataLoader, Dataset

LAYOUTS = {
    "dashes": ("%(asctime)s - %(name)s - %(levelname)s - %(message)s", None),
    "loguru": ("%(asctime)s.%(msecs)03d | %(levelname)-8s | %(name)s:%(funcName)s:%(lineno)d - %(message)s",
               "%Y-%m-%d %H:%M:%S"),
    "glog": ("%(levelname).1s%(asctime)s.%(msecs)03d000 %(process)d %(filename)s:%(lineno)d] %(message)s",
             "%m%d %H:%M:%S"),
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fault", default="none")
    parser.add_argument("--fault-rank", type=int, default=1)
    parser.add_argument("--fault-step", type=int, default=5)
    parser.add_argument("--layout", default="dashes", choices=(*LAYOUTS, "ranklog"))
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--step-seconds", type=float, default=0.3)
    parser.add_argument("--slow-factor", type=float, default=4.0)
    parser.add_argument("--pg-timeout", type=float, default=600.0)
    parser.add_argument("--ckpt-dir", default="")
    parser.add_argument("--ckpt-every", type=int, default=0)
    parser.add_argument("--flight-recorder", action="store_true", help="ranklog dumps torch's flight recorder")
    return parser.parse_args()


class Log:
    """The run's logger in the chosen layout: ``step`` and numbers go in the text, or as ``extra=`` fields."""

    def __init__(self, layout: str) -> None:
        self.structured = layout == "ranklog"
        if self.structured:
            import ranklog

            self.log = ranklog.get_logger("train")
        else:
            fmt, datefmt = LAYOUTS[layout]
            logging.basicConfig(level=logging.INFO, format=fmt, datefmt=datefmt, stream=sys.stderr)
            logging.captureWarnings(True)
            self.log = logging.getLogger("train")

    def step(self, what: str, step: int, **numbers: float) -> None:
        """``step 5 done loss 0.3125 compute_time=0.31`` (text), or the fields as ``extra=``."""
        if self.structured:
            self.log.info(f"step {what}", extra={"step": step, **numbers})
        else:
            fields = " ".join(f"{k}={v:.4f}" if k != "loss" else f"loss {v:.4f}" for k, v in numbers.items())
            self.log.info(f"step {step} {what} {fields}".rstrip())

    def __getattr__(self, name: str):  # info, warning, error, exception
        return getattr(self.log, name)


class Samples(Dataset):
    """Random regression samples; the faulty rank's loader worker dies on the fault step's batch."""

    def __init__(self, args: argparse.Namespace, rank: int, batch: int) -> None:
        self.args, self.rank, self.batch = args, rank, batch

    def __len__(self) -> int:
        return self.args.steps * self.batch

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        step = index // self.batch + 1
        if self.args.fault == "loader_killed" and self.rank == self.args.fault_rank and step == self.args.fault_step:
            time.sleep(3 * self.args.step_seconds)  # the sample's memory grows while the rank waits for it …
            os.kill(os.getpid(), signal.SIGKILL)  # … until the OOM killer strikes: no traceback in the worker
        if self.args.fault == "hang" and self.rank == self.args.fault_rank and step == self.args.fault_step:
            while True:  # a read from storage that never returns
                time.sleep(3600)
        x = torch.randn(16, generator=torch.Generator().manual_seed(index * 7 + self.rank))
        return x, x.sum(dim=0, keepdim=True)


def noise(log: Log, args: argparse.Namespace, rank: int, step: int) -> None:
    """What healthy runs print: deprecations, numbers that only look alarming, uploads that fail once
    and succeed on the next try — one with a bare traceback on stderr (what a library's
    ``traceback.print_exc()`` leaves), one logged at ERROR."""
    if step == 1:
        warnings.warn("torch.cuda.amp.autocast(args...) is deprecated. Please use torch.amp.autocast('cuda', "
                      "args...) instead.", FutureWarning, stacklevel=1)
        print("eval config: error_rate=0.00 timeout=1800s max_failures=3 nan_policy=skip", flush=True)
    if step in (2, 4) and rank == (args.fault_rank if step == 2 else 0):
        for attempt in (1, 2):
            try:
                if attempt == 1:
                    raise ConnectionResetError(104, "Connection reset by peer")
                log.info(f"metrics upload to the tracking server succeeded (attempt {attempt}/3)")
            except ConnectionResetError:
                if step == 2:
                    traceback.print_exc()
                else:
                    log.exception("metrics upload to the tracking server failed (attempt 1/3), retrying in 0.2s")
                time.sleep(0.2)
    if step == 3:
        log.warning("grad norm %.1f above clip threshold 1.0, clipping", 3.7 + rank)


def save_checkpoint(log: Log, args: argparse.Namespace, model: torch.nn.Module, step: int) -> None:
    path = Path(args.ckpt_dir) / f"step-{step:06d}.pt"
    log.info(f"saving checkpoint for step {step} to {path}")
    with open(path, "wb") as handle:  # the way most trainers write them: through a Python file
        torch.save({"step": step, "model": model.state_dict()}, handle)
    log.info(f"checkpoint for step {step} saved ({path.stat().st_size} bytes)")


@record
def main() -> None:
    args = parse_args()
    if args.flight_recorder:
        import ranklog

        ranklog.configure(flight_recorder=True)
    log = Log(args.layout)
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    log.info(f"rank {rank}/{world} pid {os.getpid()} host {os.uname().nodename} starting")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    # one worker, one batch ahead: the rank waits in the loader for the batch its worker loads
    loader = DataLoader(Samples(args, rank, batch=8), batch_size=8, num_workers=1, prefetch_factor=1)
    for step, (x, y) in enumerate(loader, start=1):
        if args.fault == "noisy":
            noise(log, args, rank, step)
        started = time.perf_counter()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        slow = args.fault == "straggler" and rank == args.fault_rank and step >= args.fault_step
        time.sleep(args.step_seconds * (args.slow_factor if slow else 1.0))
        compute = time.perf_counter() - started
        log.step("computed", step, loss=loss.item(), compute_time=compute)
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        optimizer.step()
        optimizer.zero_grad()
        log.step("done", step, step_time=time.perf_counter() - started)
        if rank == 0 and args.ckpt_every and step % args.ckpt_every == 0:
            save_checkpoint(log, args, model, step)
    log.info(f"rank {rank} finished {args.steps} steps")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
