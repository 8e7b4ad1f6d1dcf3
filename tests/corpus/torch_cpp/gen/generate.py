"""torch's C++ logging (``TORCH_CPP_LOG_LEVEL=INFO``, ``TORCH_DISTRIBUTED_DEBUG=DETAIL``: gloo's and
ProcessGroupWrapper's glog lines on stderr, which no Python sidecar sees) beside Python logging's
``%(asctime)s - %(name)s - %(levelname)s - %(message)s``, under torchrun, 1 node × 2 workers (gloo,
CPU); rank 0 dies of an uncaught exception at the end (``[rank0]:`` traceback)."""

from tests.corpus.library import PROGRAMS, generate_torchrun
from tests.scenarios.torchrun_gen import TorchrunJob

JOB = TorchrunJob(nproc=2, script=PROGRAMS / "train.py", worker_args=["--layout", "dash", "--fail-rank", "0"],
                  run_id="torch_cpp", env={"TORCH_CPP_LOG_LEVEL": "INFO", "TORCH_DISTRIBUTED_DEBUG": "DETAIL"})

if __name__ == "__main__":
    generate_torchrun(__file__, __doc__, JOB, tools=("torch",))
