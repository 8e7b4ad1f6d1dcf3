"""A Lightning run on the CPU with 2 processes, started by Lightning's own launcher (``python
lightning_train.py``: the DDP strategy re-runs this script for rank 1 as a subprocess sharing the
console). Lightning's own lines (device summary, ``Initializing distributed``, the model summary
table, rank-zero warnings, the progress bar) beside the script's ``logging`` lines in layout
``--layout`` (tests/corpus/layouts.py). ``--fail-rank R``: rank R raises in a training step.
"""

from tests.corpus import sidecar

sidecar.install()

import argparse  # noqa: E402

import lightning as L  # noqa: E402
import torch  # noqa: E402

from tests.corpus.layouts import setup  # noqa: E402


class Regression(L.LightningModule):
    def __init__(self, log, fail_rank: int, fail_step: int) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(16, 1)
        self.log_, self.fail_rank, self.fail_step = log, fail_rank, fail_step

    def on_fit_start(self) -> None:
        sidecar.set_identity(rank=self.global_rank, local_rank=self.local_rank)
        self.log_.info(f"fit started on global rank {self.global_rank} of {self.trainer.world_size}")

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log_.info(f"step {self.global_step} loss {loss.item():.4f}")
        if self.global_rank == self.fail_rank and self.global_step == self.fail_step:
            raise ValueError(f"sample {batch_idx} has 0 tokens after truncation (step {self.global_step})")
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


@sidecar.entrypoint
def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layout", default="examples")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--fail-rank", type=int, default=-1)
    args = parser.parse_args()
    log = setup(args.layout)
    x = torch.randn(96, 16, generator=torch.Generator().manual_seed(0))
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(dim=1, keepdim=True)), batch_size=8)
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_steps=args.steps, logger=False,
                        enable_checkpointing=False, log_every_n_steps=1)
    trainer.fit(Regression(log, args.fail_rank, args.steps - 2), data)
    log.info(f"rank {trainer.global_rank} done")


if __name__ == "__main__":
    main()
