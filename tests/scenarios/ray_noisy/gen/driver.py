"""Loud but healthy: workers warn every step (deprecations, a slow data loader), one task fails on its
first attempt and succeeds on Ray's retry, a worker logs a handled exception with its traceback at
WARNING and carries on, and the run finishes normally. Nothing here is the cause of a failure."""

import logging
import os
import sys
import warnings

import ray

ray.init(num_cpus=2, include_dashboard=False, _temp_dir=sys.argv[1])
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
log = logging.getLogger("driver")


@ray.remote(num_cpus=0.25)
class Trainer:
    def __init__(self, rank: int) -> None:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.log = logging.getLogger("trainer")
        self.rank = rank

    def step(self, step: int) -> float:
        warnings.warn("torch.cuda.amp.autocast(args...) is deprecated. Please use torch.amp.autocast('cuda', "
                      "args...) instead.", FutureWarning, stacklevel=1)
        self.log.warning("[Rank %d] data loader slow: batch took 2.3s (> 1.0s)", self.rank)
        if self.rank == 2 and step == 1:
            try:
                raise ConnectionResetError("[Errno 104] Connection reset by peer")
            except ConnectionResetError:
                self.log.warning("[Rank %d] checkpoint upload failed, retrying in 1s", self.rank, exc_info=True)
            self.log.info("[Rank %d] checkpoint upload retried: ok", self.rank)
        loss = 2.0 / (step + 2)
        self.log.info("[Rank %d] step %d loss %.4f", self.rank, step, loss)
        return loss


@ray.remote(num_cpus=0.25, max_retries=2, retry_exceptions=True)
def fetch_batch(marker_dir: str, index: int) -> int:
    marker = os.path.join(marker_dir, f"fetched-{index}")
    if index == 1 and not os.path.exists(marker):
        open(marker, "w").close()
        raise TimeoutError(f"object store fetch of batch {index} timed out after 5s")
    return index


trainers = [Trainer.options(name=f"trainer_{r}").remote(r) for r in range(4)]
for step in range(4):
    batches = ray.get([fetch_batch.remote(sys.argv[1], step * 4 + i) for i in range(2)])
    losses = ray.get([t.step.remote(step) for t in trainers])
    log.info("step %d batches %s mean loss %.4f", step, batches, sum(losses) / len(losses))
log.info("training finished")
ray.shutdown()
