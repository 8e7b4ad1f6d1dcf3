"""A hydra app (``@hydra.main``) whose job logging hydra sets up itself: ``[%(asctime)s][%(name)s]
[%(levelname)s] - %(message)s`` on stdout and in ``<run dir>/hydra_train.log``. It logs its composed
config as YAML (a multi-line record) and runs tests/corpus/programs/train.py's loop. Under torchrun
each rank gets its own run dir (``hydra.run.dir=hydra/rank${oc.env:RANK}``).
"""

from tests.corpus import sidecar

sidecar.install()

import logging  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402

import hydra  # noqa: E402
from hydra.core.config_store import ConfigStore  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from tests.corpus.programs.train import train  # noqa: E402

log = logging.getLogger(__name__)


@dataclass
class Optim:
    lr: float = 0.01
    betas: list[float] = field(default_factory=lambda: [0.9, 0.95])


@dataclass
class Config:
    steps: int = 4
    fail_rank: int = -1
    model: str = "tiny-mlp"
    optim: Optim = field(default_factory=Optim)


ConfigStore.instance().store(name="config", node=Config)


@hydra.main(version_base=None, config_name="config")
def main(cfg: Config) -> None:
    train(log, cfg.steps, cfg.fail_rank, what="hydra", config=OmegaConf.to_yaml(cfg).rstrip())


if __name__ == "__main__":
    sidecar.entrypoint(main)()
