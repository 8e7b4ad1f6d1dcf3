"""torchrun, 1 node × 3 workers (gloo, 6 s process-group timeout): rank 2 lags in an evaluation
before the step-3 all_reduce and writes nothing more; ranks 0 and 1 time out in the collective
(gloo's "Timed out waiting … for recv operation"). The laggard is the root cause.
Workers log in the cookbook's ``time - name - LEVEL - msg``, with torch's C++ lines on (``TORCH_CPP_LOG_LEVEL=INFO``)."""

from pathlib import Path

from tests.scenarios.library import finish
from tests.scenarios.torchrun_gen import TorchrunJob, command_lines, run

HERE = Path(__file__).resolve().parents[1]
JOB = TorchrunJob(nproc=3, worker_args=["--layout", "dash", "--fault", "lag", "--fault-rank", "2", "--fault-step", "3", "--pg-timeout", "6"],
                  env={"TORCH_CPP_LOG_LEVEL": "INFO"})

if __name__ == "__main__":
    run(JOB, HERE / "out")
    finish(HERE, doc=__doc__, commands=command_lines(JOB), tools=("torch",), failure=True, rank=2, node="node0",
           category="hang/silence", step=3, decisive="evaluating on the validation set")
