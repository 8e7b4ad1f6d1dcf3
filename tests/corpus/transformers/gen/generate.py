"""Hugging Face transformers: the Trainer on a tiny GPT-2 built from a config (no download), logged as
run_clm.py sets it up (the script's basicConfig lines on stdout, transformers' explicit format
``[INFO|file.py:N] time >> msg`` with multi-line config dumps on stderr, the Trainer's printed loss
dictionaries), under torchrun, 1 node × 2 workers (DDP over gloo, CPU); rank 1 raises after
training (``[rank1]:`` traceback)."""

from tests.corpus.library import PROGRAMS, generate_torchrun
from tests.scenarios.torchrun_gen import TorchrunJob

JOB = TorchrunJob(nproc=2, script=PROGRAMS / "hf_trainer.py", worker_args=["--fail-rank", "1"], run_id="transformers",
                  env={"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})

if __name__ == "__main__":
    generate_torchrun(__file__, __doc__, JOB, tools=("torch", "transformers"))
