"""A small data-parallel training script (gloo, CPU) that logs in one layout of tests/corpus/layouts.py.

Run under a launcher (``torchrun … train.py --layout deepspeed``). It does what a real script's
output has: a start-up line per rank, a multi-line config dump, step lines, a ``print`` without a
time, a Python warning, a caught exception logged with its traceback followed by the run's normal
lines, and (``--fail-rank R``) an uncaught exception on rank R at the end, which torch prints with
``[rankR]:`` in front of each line. The truth sidecar (tests/corpus/sidecar.py) records it all.
"""

from tests.corpus import sidecar

sidecar.install()

import argparse  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from tests.corpus.layouts import setup  # noqa: E402

CONFIG = """model:
  name: tiny-mlp
  hidden: 16
optim:
  lr: 0.01
  betas: [0.9, 0.95]
data:
  shards: 4"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layout", required=True)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--fail-rank", type=int, default=-1)
    parser.add_argument("--step-seconds", type=float, default=0.05)
    return parser.parse_args()


def upload_checkpoint(step: int) -> None:
    raise ConnectionResetError(104, f"Connection reset by peer (checkpoint step {step})")


@sidecar.entrypoint
def main() -> None:
    args = parse_args()
    train(setup(args.layout), args.steps, args.fail_rank, args.step_seconds, f"layout {args.layout}")


def train(log: Any, steps: int, fail_rank: int, step_seconds: float = 0.05, what: str = "",
          config: str = CONFIG) -> None:
    """The training loop and its output; `log` is the logger of the layout under test."""
    if not dist.is_initialized():  # accelerate's PartialState may have done it
        dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    sidecar.set_identity(rank=rank, local_rank=int(os.environ.get("LOCAL_RANK", rank)))
    log.info(f"rank {rank}/{world} started (pid {os.getpid()})")
    if rank == 0:
        log.info("config:\n" + config)
    print(f"[startup] world size {world}, {what}", flush=True)
    torch.manual_seed(rank)
    model = torch.nn.Linear(16, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(1, steps + 1):
        x = torch.randn(32, 16)
        loss = torch.nn.functional.mse_loss(model(x), x.sum(dim=1, keepdim=True))
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
            p.grad /= world
        optimizer.step()
        optimizer.zero_grad()
        log.info(f"step {step} loss {loss.item():.4f}")
        if step == 1:
            warnings.warn("torch.cuda.amp.GradScaler(args...) is deprecated. Please use "
                          "torch.amp.GradScaler('cuda', args...) instead.", FutureWarning, stacklevel=1)
        if step == 2 and rank == world - 1:
            try:
                upload_checkpoint(step)
            except ConnectionResetError:
                log.exception("checkpoint upload failed; retrying (1/3)")
            log.warning("checkpoint upload: retry 1/3 succeeded")
        time.sleep(step_seconds)
    dist.barrier()
    log.info(f"finished {steps} steps")
    if rank == fail_rank:
        raise RuntimeError(f"evaluation failed on rank {rank}: metric 'accuracy' is NaN")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
