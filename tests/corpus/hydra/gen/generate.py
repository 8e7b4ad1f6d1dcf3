"""hydra's job logging (``[%(asctime)s][%(name)s][%(levelname)s] - %(message)s`` on stdout and in each
run dir's ``hydra_train.log``), the composed config logged as YAML, under torchrun, 1 node × 2 workers
(gloo, CPU), each rank in its own run dir; a clean run with a caught exception logged with its
traceback and the lines after it."""

from tests.corpus.library import PROGRAMS, generate_torchrun
from tests.scenarios.torchrun_gen import TorchrunJob

JOB = TorchrunJob(nproc=2, script=PROGRAMS / "hydra_train.py", worker_args=["hydra.run.dir=hydra/rank${oc.env:RANK}"],
                  run_id="hydra")

if __name__ == "__main__":
    generate_torchrun(__file__, __doc__, JOB, tools=("torch", "hydra-core"))
