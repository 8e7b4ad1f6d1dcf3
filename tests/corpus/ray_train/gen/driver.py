"""Ray Train V2: a ``TorchTrainer`` with 2 CPU workers (gloo) on a fresh local Ray; each worker logs in
the ``dash`` layout (tests/corpus/layouts.py), prints, warns, logs a caught exception with its
traceback and goes on. Run by ``generate.py`` as ``python driver.py <temp dir>``."""

import sys
import tempfile

import ray
import torch
import torch.distributed as dist
from ray.train import RunConfig, ScalingConfig, get_context
from ray.train.torch import TorchTrainer

from tests.corpus import sidecar
from tests.corpus.programs.train import CONFIG, upload_checkpoint


def train_func(config: dict) -> None:
    from tests.corpus.layouts import setup

    context = get_context()
    rank = context.get_world_rank()
    sidecar.set_identity(rank=rank, local_rank=context.get_local_rank())
    log = setup("dash")
    log.info(f"worker {rank}/{context.get_world_size()} started")
    if rank == 0:
        log.info("config:\n" + CONFIG)
    print(f"[startup] rank {rank} on {context.get_node_rank()}", flush=True)
    model = ray.train.torch.prepare_model(torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(1, config["steps"] + 1):
        x = torch.randn(32, 16)
        loss = torch.nn.functional.mse_loss(model(x), x.sum(dim=1, keepdim=True))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        log.info(f"step {step} loss {loss.item():.4f}")
        if step == 2 and rank == 1:
            try:
                upload_checkpoint(step)
            except ConnectionResetError:
                log.exception("checkpoint upload failed; retrying (1/3)")
            log.warning("checkpoint upload: retry 1/3 succeeded")
    dist.barrier()
    log.info("finished")


if __name__ == "__main__":
    sidecar.set_identity(role="driver")
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=sys.argv[1])
    trainer = TorchTrainer(train_func, train_loop_config={"steps": 4},
                           scaling_config=ScalingConfig(num_workers=2, use_gpu=False, resources_per_worker={"CPU": 1}),
                           run_config=RunConfig(storage_path=tempfile.mkdtemp(prefix="raytrain-"), name="corpus"))
    result = trainer.fit()
    print(f"training finished: {result.metrics}")
    ray.shutdown()
