"""torchrun, 2 nodes × 2 workers (gloo), logging in loguru's layout (``… | INFO     | train:main:88 - …``):
rank 0 saves a checkpoint every 3 steps into a 32 KiB file system of node0's own (a tmpfs: a disk
that is nearly full). The step-3 checkpoint fits; at step 6 ``torch.save`` hits a real ENOSPC:
``OSError: [Errno 28] No space left on device`` is the first exception of the chain, torch's
``[enforce fail at inline_container.cc:…] . unexpected pos`` the last. Rank 0 dies; the other ranks
lose it in the next all_reduce."""

import shutil
from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.torchrun_gen import CLASSES, Node, TorchrunJob, command_lines, run

HERE = Path(__file__).resolve().parents[1]
CKPT = "/tmp/ranklog-scenario-ckpt"  # node0 mounts its small disk here


def job() -> TorchrunJob:
    return TorchrunJob(nodes=[Node("node0", tmpfs={CKPT: "32k"}), Node("node1")], nproc=2, script=CLASSES,
                       worker_args=["--layout", "loguru", "--steps", "9", "--ckpt-dir", CKPT, "--ckpt-every", "3"])


if __name__ == "__main__":
    Path(CKPT).mkdir(exist_ok=True)
    try:
        run(job(), HERE / "out")
    finally:
        shutil.rmtree(CKPT, ignore_errors=True)
    finish(HERE, doc=__doc__, commands=[f"[host node0] mount -t tmpfs -o size=32k tmpfs {CKPT}",
                                        *command_lines(job())], tools=("torch",), failure=True, rank=0,
           node="node0", category="disk full/quota", step=6, decisive="No space left on device")
