"""Lightning 2 on the CPU with 2 processes, started by Lightning's own launcher (``python
lightning_train.py``: the DDP strategy re-runs the script for rank 1, both on one console with no
prefix): Lightning's device summary, ``Initializing distributed``, model summary table, rank-zero
warnings and progress bar beside the script's lines in the ``examples`` layout (``%(asctime)s -
%(levelname)s - %(name)s - %(message)s``, ``MM/DD/YYYY``); rank 1 raises a ``ValueError`` in a
training step."""

import sys
from pathlib import Path

from tests.corpus.library import PROGRAMS, console_entry, entry_dir, finish, shared_console, write_sources

HERE = entry_dir(__file__)
CONSOLE = "lightning.console.log"
ARGV = [sys.executable, str(PROGRAMS / "lightning_train.py"), "--layout", "examples", "--fail-rank", "1"]

if __name__ == "__main__":
    out, truth, _ = console_entry(HERE, ARGV, CONSOLE)
    write_sources(truth, shared_console(out, truth, CONSOLE))
    finish(HERE, doc=__doc__, commands=["[host node0] python " + " ".join(Path(a).name for a in ARGV[1:])],
           tools=("torch", "lightning"))
