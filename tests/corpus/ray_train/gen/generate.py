"""Ray Train V2 (``TorchTrainer``, 2 CPU workers over gloo, a fresh local Ray 2.60): the workers log in
the ``dash`` layout, print, warn and log a caught exception with its traceback; Ray keeps each
worker's stdout/stderr in ``logs/worker-<id>-<job>-<pid>.out|err`` and copies their lines to the
driver's console behind ``(RayTrainWorker pid=N)``. ``RAY_DEDUP_LOGS=0``: Ray would otherwise fold
identical lines of several workers into one ``[repeated Nx across cluster]`` line."""

import os

from tests.corpus.library import entry_dir, finish, fresh, ray_sources, sidecar_env, write_sources
from tests.scenarios.ray_gen import run

HERE = entry_dir(__file__)

if __name__ == "__main__":
    out, truth = fresh(HERE)
    os.environ.update({**sidecar_env(truth), "RAY_DEDUP_LOGS": "0", "OMP_NUM_THREADS": "1"})
    ray = run(HERE, timeout=400)  # a Ray Train V2 start takes a minute or more on 2 busy cores
    write_sources(truth, ray_sources(out, truth))
    finish(HERE, doc=ray.doc(__doc__), commands=ray.commands(), tools=("ray", "torch"))
