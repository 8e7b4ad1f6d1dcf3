"""accelerate's logger (``accelerate.logging.get_logger``, every process logging) under its examples'
``basicConfig`` (``%(asctime)s - %(levelname)s - %(name)s - %(message)s``, ``MM/DD/YYYY`` times),
started by ``accelerate launch --multi_gpu`` with 2 processes (on the CPU: no GPU here; gloo), ``--tee 3 --log_dir`` (torch elastic's
per-rank files and ``[defaultN]:`` console lines); a caught exception with its traceback and the lines
after it, and an uncaught exception on rank 0 at the end."""

import sys
from pathlib import Path

from tests.corpus.library import PROGRAMS, console_entry, entry_dir, finish, torchrun_sources, write_sources

HERE = entry_dir(__file__)
CONSOLE = "accelerate.console.log"


def argv(log_dir: str) -> list[str]:
    return [str(Path(sys.executable).with_name("accelerate")), "launch", "--multi_gpu", "--num_processes", "2",
            "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0",
            "--tee", "3", "--log_dir", log_dir, str(PROGRAMS / "train.py"), "--layout", "accelerate",
            "--fail-rank", "0"]


if __name__ == "__main__":
    out, truth, _ = console_entry(HERE, argv("."), CONSOLE)
    write_sources(truth, torchrun_sources(out, truth, console=CONSOLE))
    finish(HERE, doc=__doc__, commands=["[host node0] " + " ".join(a if "/" not in a else Path(a).name for a in argv("."))],
           tools=("torch", "accelerate"))
