"""A PPO-style training loop that reports its metrics through verl's own ``Tracking`` loggers.

verl's trainer computes its metrics with numpy reductions (``np.mean`` → ``np.float64``, lengths as
``np.int32``) and hands them to ``verl.utils.tracking.Tracking``: the console backend prints
``step:N - key:repr(value) - …`` and the file backend writes ``{"step": N, "data": {…}}`` JSONL
(orjson: NaN/Inf become ``null``). ``--bad-step S --bad-metric actor/grad_norm --bad-value nan``
makes the model's input non-finite from step S on, so the real gradient norm turns NaN (or the loss
Inf); like verl's actor, the run then logs a warning and goes on.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from verl.utils.tracking import Tracking


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backends", default="console")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--bad-step", type=int, default=0, help="0: a healthy run")
    parser.add_argument("--bad-value", default="nan", choices=("nan", "inf"))
    parser.add_argument("--step-seconds", type=float, default=0.2)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tracker = Tracking(project_name="ppo-scenario", experiment_name="qwen-tiny",
                       default_backend=args.backends.split(","))
    for step in range(1, args.steps + 1):
        started = time.perf_counter()
        x = torch.randn(16, 8)
        if args.bad_step and step >= args.bad_step:
            x[0, 0] = float(args.bad_value)  # a corrupted sample: the loss and the gradients follow
        loss = model(x).pow(2).mean()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        if not torch.isfinite(grad_norm):
            print(f"WARN: rank 0 grad_norm is not finite: {grad_norm}", flush=True)
            optimizer.zero_grad()
        else:
            optimizer.step()
            optimizer.zero_grad()
        lengths = rng.integers(120, 900, size=16).astype(np.int32)
        time.sleep(args.step_seconds)
        elapsed = time.perf_counter() - started
        metrics = {
            "actor/pg_loss": np.mean([loss.item()]),
            "actor/grad_norm": np.mean([grad_norm.item()]),
            "actor/lr": 1e-3,
            "critic/score/mean": np.mean(rng.random(16)),
            "response_length/mean": np.mean(lengths),
            "response_length/max": lengths.max(),
            "timing_s/step": elapsed,
            "perf/throughput": float(lengths.sum() / elapsed),
        }
        tracker.log(data=metrics, step=step)


if __name__ == "__main__":
    main()
