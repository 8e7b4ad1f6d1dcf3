"""One rank of a job that logs the README's way (``ranklog.get_logger``, metrics as ``extra=`` fields), for
the triage/report job tests: ``RANKLOG_JOB=J RANK=R python logger_job.py STEPS [FAIL_STEP]``.

Each step: ``log.info("step done", extra={"step": s, "loss": …, "throughput": …})``. With FAIL_STEP, the
rank raises at that step and logs the traceback (``log.exception``) before it dies, as a training script
whose main loop is wrapped in a try/except that logs and re-raises does.
"""

from __future__ import annotations

import sys
import time

import ranklog


def main() -> int:
    steps = int(sys.argv[1])
    fail_step = int(sys.argv[2]) if len(sys.argv) > 2 else None
    log = ranklog.get_logger("train")
    log.info("starting training")
    try:
        for step in range(1, steps + 1):
            if step == fail_step:
                raise ValueError(f"batch {step} holds a label (1024) outside the 1000 classes")
            time.sleep(0.02)
            log.info("step done", extra={"step": step, "loss": round(2.0 / step, 4), "throughput": 3100.0 + step})
    except ValueError:
        log.exception("training failed")
        ranklog.flush()
        return 1
    log.info("training finished")
    ranklog.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
