"""A scripted training job for the Grafana replay: two ranks of a real Python process logging through
``ranklog.get_logger`` the way a training script does, plus the lines other tools leave in a log:

- every step: ``step done`` with ``extra={"step", "loss", "grad_norm", "step_time"}`` (a duration
  string), which the archive keeps as structured metadata;
- every 3rd step a logfmt line (``event=rollout batch=… latency=…ms tokens=… size=…KB``), as a
  rollout worker prints it; every 5th step a JSON payload as the message (``{"event": "eval", …}``);
- a ``grad_norm is not finite`` warning now and then; rank 1 ends with a CUDA OOM traceback.

Nothing here is a fixture the assertions trust: the test reads what was archived back with
``ranklog query`` and compares every Loki answer with that.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.helpers.procs import REPO

JOB = "grpo-replay"
RANKS = 2
STEPS = 60
_SCRIPT = textwrap.dedent("""
    import json, math, random, sys, time
    import ranklog

    rank, steps = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(rank)
    log = ranklog.get_logger("trainer")
    rollout = ranklog.get_logger("rollout")
    for step in range(steps):
        loss = round(2.0 / (1 + 0.05 * step) + rng.uniform(0, 0.1), 4)
        log.info("step done", extra={"step": step, "loss": loss, "grad_norm": round(rng.uniform(0.5, 3.0), 3),
                                     "step_time": f"{rng.randint(80, 400)}ms"})
        if step % 3 == 0:
            rollout.info(f"event=rollout batch={step // 3} latency={rng.randint(20, 900)}ms "
                         f"tokens={rng.randint(100, 4000)} size={rng.randint(1, 64)}KB")
        if step % 5 == 0:
            log.info(json.dumps({"event": "eval", "step": step, "accuracy": round(0.5 + step / 200, 3),
                                 "split": "gsm8k"}))
        if step % 17 == 16:
            log.warning("grad_norm is not finite", extra={"step": step})
        time.sleep(0.01)
    if rank == 1:
        try:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        except RuntimeError:
            log.exception("training step failed", extra={"step": steps})
    ranklog.shutdown()
""")


def run_workload(log_dir: Path) -> None:
    """Run the job's ranks to completion, writing under `log_dir`."""
    for rank in range(RANKS):
        env = {**os.environ, "RANKLOG_LOG_DIR": str(log_dir), "RANKLOG_JOB": JOB, "RANK": str(rank),
               "LOCAL_RANK": str(rank), "WORLD_SIZE": str(RANKS)}
        subprocess.run([sys.executable, "-c", _SCRIPT, str(rank), str(STEPS)], env=env, check=True, timeout=120,
                       cwd=REPO)
