"""Python logging's basicConfig default layout (`LEVEL:logger:message`, no time), under torchrun, 1
node × 2 workers (gloo, CPU): a config dump, steps, a `print`, a warning, a caught
`ConnectionResetError` logged with its traceback and the lines after it."""

from tests.corpus.library import PROGRAMS, entry_dir, finish, torchrun_entry
from tests.scenarios.torchrun_gen import TorchrunJob

HERE = entry_dir(__file__)
JOB = TorchrunJob(nproc=2, script=PROGRAMS / "train.py", worker_args=["--layout", "basic", "--fail-rank", "-1"],
                  run_id="logging_basic")

if __name__ == "__main__":
    commands, _ = torchrun_entry(HERE, JOB)
    finish(HERE, doc=__doc__, commands=commands, tools=("torch",))
