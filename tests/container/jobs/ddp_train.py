"""A small real DDP job (torch CPU, gloo) for the container test, started by torchrun as a normal user.

Each rank prints verl-style step lines to stdout and logs through `logging` to stderr; with
`torchrun --redirects 3 --log-dir DIR` torchrun files them under DIR/<run_id>_*/attempt_0/<rank>/.
"""

import logging

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log = logging.getLogger("ddp_train")
    torch.manual_seed(rank)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(25):
        loss = model(torch.randn(16, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step:{step} - rank:{rank} - train/loss:{loss.item():.5f}", flush=True)
        log.info("step %d done on rank %d of %d", step, rank, world)
    log.warning("rank %d finished", rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
