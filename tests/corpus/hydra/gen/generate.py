"""hydra's job logging (``[%(asctime)s][%(name)s][%(levelname)s] - %(message)s`` on stdout and in each
run dir's ``hydra_train.log``), the composed config logged as YAML, under torchrun, 1 node × 2 workers
(gloo, CPU), each rank in its own run dir; a clean run with a caught exception logged with its
traceback and the lines after it."""

from tests.corpus.library import PROGRAMS, entry_dir, finish, torchrun_entry
from tests.scenarios.torchrun_gen import TorchrunJob

HERE = entry_dir(__file__)
JOB = TorchrunJob(nproc=2, script=PROGRAMS / "hydra_train.py", worker_args=["hydra.run.dir=hydra/rank${oc.env:RANK}"],
                  run_id="hydra")

if __name__ == "__main__":
    commands, _ = torchrun_entry(HERE, JOB)
    finish(HERE, doc=__doc__, commands=commands, tools=("torch", "hydra-core"))
