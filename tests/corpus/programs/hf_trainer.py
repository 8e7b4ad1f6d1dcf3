"""Hugging Face transformers' Trainer on a tiny GPT-2 built from a config (nothing from a hub), logged
the way transformers' example scripts (run_clm.py) set logging up.

The script's own lines go through ``logging.basicConfig`` on stdout
(``%(asctime)s - %(levelname)s - %(name)s - %(message)s``, ``%m/%d/%Y %H:%M:%S``); transformers' own
loggers print in its explicit format (``[INFO|trainer.py:N] time >> msg``) on stderr, including
multi-line config dumps; the Trainer's loss dictionaries are printed (its tqdm bar is off, see the README). Under
torchrun (DDP over gloo on the CPU). ``--fail-rank R``: rank R raises after training.
"""

from tests.corpus import sidecar

sidecar.install()

import argparse  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments, set_seed  # noqa: E402

logger = logging.getLogger(__name__)


class Tokens(torch.utils.data.Dataset):
    """Random token ids: the model learns nothing, the Trainer logs everything."""

    def __init__(self, count: int, length: int, vocab: int) -> None:
        self.ids = torch.randint(0, vocab, (count, length), generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


@sidecar.entrypoint
def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--fail-rank", type=int, default=-1)
    args = parser.parse_args()
    output_dir = tempfile.mkdtemp(prefix="hf-corpus-")
    training_args = TrainingArguments(output_dir=output_dir, max_steps=args.steps, per_device_train_batch_size=4,
                                      logging_steps=2, save_strategy="no", report_to=[], use_cpu=True,
                                      ddp_backend="gloo", dataloader_num_workers=0, seed=0,
                                      # tqdm's bar is a line rewritten with \r that other records land inside
                                      # of: no record boundary to judge there (tests/corpus/README.md)
                                      disable_tqdm=True)
    # run_clm.py's logging setup
    logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s",
                        datefmt="%m/%d/%Y %H:%M:%S", handlers=[logging.StreamHandler(sys.stdout)])
    log_level = training_args.get_process_log_level()  # INFO on the main process, WARNING on replicas
    logger.setLevel(log_level)
    transformers.utils.logging.set_verbosity(log_level)
    transformers.utils.logging.enable_default_handler()
    transformers.utils.logging.enable_explicit_format()
    sidecar.set_identity(rank=training_args.process_index, local_rank=training_args.local_process_index)
    logger.warning(f"Process rank: {training_args.local_process_index}, device: {training_args.device}, "
                   f"n_gpu: {training_args.n_gpu}, distributed training: {training_args.parallel_mode.value == 'distributed'}")
    logger.info(f"Training/evaluation parameters {training_args}")
    set_seed(training_args.seed)
    config = GPT2Config(n_layer=2, n_head=2, n_embd=32, n_positions=32, vocab_size=128)
    logger.info(f"Training new model from scratch - Total size={sum(p.numel() for p in GPT2LMHeadModel(config).parameters()) / 2**20:.2f}M params")
    model = GPT2LMHeadModel(config)
    trainer = Trainer(model=model, args=training_args, train_dataset=Tokens(64, 32, config.vocab_size))
    result = trainer.train()
    trainer.log_metrics("train", result.metrics)
    if training_args.process_index == args.fail_rank:
        raise RuntimeError(f"evaluation failed on rank {training_args.process_index}: perplexity is NaN")
    logger.info(f"done on rank {os.environ.get('RANK')}")


if __name__ == "__main__":
    main()
