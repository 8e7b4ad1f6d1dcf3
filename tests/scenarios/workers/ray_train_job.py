"""A Ray Train V2 job for the scenario generators: a ``TorchTrainer`` with 4 CPU workers (gloo) whose
train function logs its steps (Hugging Face's dashes layout) and reports metrics with
``ray.train.report``. ``run(temp_dir, fault_rank, fault_step)``: the worker of that world rank raises
ValueError at that step (None: a clean run); the other workers lose it in the step's all_reduce, the
controller prints ``[Rank N Error Snippet]`` and ``trainer.fit()`` raises ``ray.train.WorkerGroupError``."""

import logging
import os
import time

os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")

import ray
import ray.train
import torch
from ray.train import RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer


def train_loop(config: dict) -> None:
    import torch.distributed as dist

    logging.basicConfig(level=logging.INFO, format="%(asctime)s - %(name)s - %(levelname)s - %(message)s")
    log = logging.getLogger("train")
    rank = ray.train.get_context().get_world_rank()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(1, config["steps"] + 1):
        loss = model(torch.randn(16, 8)).pow(2).mean()
        loss.backward()
        if rank == config["fault_rank"] and step == config["fault_step"]:
            raise ValueError(f"batch {step} holds a label (1024) outside the 1000 classes")
        for p in model.parameters():
            dist.all_reduce(p.grad)
        optimizer.step()
        optimizer.zero_grad()
        log.info("step %d done loss %.4f", step, loss.item())
        ray.train.report({"step": step, "loss": loss.item()})
        time.sleep(0.2)


def run(temp_dir: str, fault_rank: int | None = None, fault_step: int | None = None, steps: int = 8) -> None:
    ray.init(num_cpus=4, include_dashboard=False, _temp_dir=temp_dir)
    trainer = TorchTrainer(train_loop, train_loop_config={"steps": steps, "fault_rank": fault_rank,
                                                          "fault_step": fault_step},
                           scaling_config=ScalingConfig(num_workers=4, use_gpu=False),
                           run_config=RunConfig(name="ranklog-scenario",
                                                storage_path=os.path.join(temp_dir, "results")))
    trainer.fit()
