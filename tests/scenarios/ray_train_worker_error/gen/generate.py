"""Ray Train V2 (Ray 2.60): a ``TorchTrainer`` of 4 CPU workers (gloo). At step 5 the train function of
world rank 2 raises; the other workers lose it in the all_reduce (gloo's ``Connection closed by
peer``), Ray Train's controller prints ``[Rank 2 Error Snippet]`` and the driver ends with
``ray.train.WorkerGroupError``. Who is world rank 2 (pid, node) is in Ray Train's own logs
(``logs/train/``) and the controller's worker-group listing."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.ray_gen import run

HERE = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    ray_run = run(HERE, timeout=600)
    assert ray_run.exit_code != 0, "the trainer was supposed to fail"
    finish(HERE, doc=ray_run.doc(__doc__), commands=ray_run.commands(), tools=("ray", "torch"), failure=True, rank=2,
           node=ray_run.host, category="uncaught exception", step=5,
           decisive="ValueError: batch 5 holds a label (1024) outside the 1000 classes")
