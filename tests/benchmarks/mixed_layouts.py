"""A mixed-layout corpus for the benchmarks: several of the ecosystem's log layouts, one a file.

Each file is what a training process writes through the real ``logging`` module (and torch's own
glog formatter) in one of the layouts the ML ecosystem uses — the ``%(asctime)s - %(name)s - …``
family, accelerate's and transformers' example scripts, transformers' explicit format, DeepSpeed's
logger, hydra's job logging, torch elastic's glog-style lines behind torchrun's ``--tee`` prefixes — with what
real runs have besides step lines: a warning every 97 records, a caught exception logged with its
traceback every 500, a config dump every 2,000 (so one line in ~70 belongs to a multi-line record).
The ranklog agent has to learn each file's layout; a shipper such as rsyslog forwards lines.

``write(directory, lines)`` writes the files (``lines`` in all, split evenly) and returns
``[(path, lines, records)]``: what a line shipper delivers and what a record parser produces.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path

START = 1_796_212_800.0  # 2026-12-02T12:00:00Z
CONFIG = "config:\nmodel:\n  name: tiny-mlp\n  hidden: 16\noptim:\n  lr: 0.01\n  betas: [0.9, 0.95]"


def _formatter(fmt: str, datefmt: str | None = None) -> logging.Formatter:
    formatter = logging.Formatter(fmt, datefmt)
    formatter.converter = time.gmtime
    return formatter


# name → (formatter, the launcher's prefix on every line)
LAYOUTS: dict[str, tuple[Callable[[], logging.Formatter], str]] = {
    "dash": (lambda: _formatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s"), ""),
    "examples": (lambda: _formatter("%(asctime)s - %(levelname)s - %(name)s - %(message)s", "%m/%d/%Y %H:%M:%S"), ""),
    "transformers": (lambda: _formatter("[%(levelname)s|%(filename)s:%(lineno)s] %(asctime)s >> %(message)s"), ""),
    "deepspeed": (lambda: _formatter("[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s] "
                                     "%(message)s"), ""),
    "hydra": (lambda: _formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"), ""),
    # torch.distributed.elastic's glog-style lines (torchrun's own) behind its --tee prefixes
    "glog, teed": (lambda: _formatter("%(levelname).1s%(asctime)s.%(msecs)03d000 %(process)d %(filename)s:%(lineno)d] "
                                      "%(message)s", "%m%d %H:%M:%S"), "[default{rank}]:"),
}


def _exc_info() -> tuple:
    try:
        raise ConnectionResetError(104, "Connection reset by peer")
    except ConnectionResetError:
        return sys.exc_info()


def _records(formatter: logging.Formatter, prefix: str, lines: int) -> tuple[list[str], int]:
    """Exactly `lines` lines of one file, and the number of records they hold."""
    exc = _exc_info()
    out: list[str] = []
    records = 0
    i = 0
    while len(out) < lines:
        level, msg, exc_info = logging.INFO, f"step {i} finished in {100 + i % 900} ms, loss {(i % 1000) / 997:.4f}", None
        if i % 97 == 0:
            level = logging.WARNING
        if i % 500 == 499:
            level, msg, exc_info = logging.ERROR, "checkpoint upload failed; retrying (1/3)", exc
        if i % 2000 == 1000:
            msg = CONFIG
        text = _format(formatter, level, msg, exc_info, i).split("\n")
        if len(out) + len(text) > lines:  # the last lines: one-line records, so the count is exact
            text = _format(formatter, logging.INFO, f"step {i}", None, i).split("\n")
        out += [prefix + line for line in text]
        records += 1
        i += 1
    return out, records


def _format(formatter: logging.Formatter, level: int, msg: str, exc_info, i: int) -> str:
    record = logging.LogRecord("verl.trainer", level, "trainer.py", 727, msg, None, exc_info, func="train")
    record.created = START + i * 0.001
    record.msecs = (record.created - int(record.created)) * 1000
    return formatter.format(record)


def write(directory: Path, lines: int) -> list[tuple[Path, int, int]]:
    """The corpus's files under `directory` (see the module docstring); written once, then reused."""
    index = directory / "corpus.json"
    if index.exists():
        return [(directory / name, count, records) for name, count, records in json.loads(index.read_text())]
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    per_file = lines // len(LAYOUTS)
    for k, (name, (make, prefix)) in enumerate(LAYOUTS.items()):
        text, records = _records(make(), prefix.format(rank=k), per_file + (lines % len(LAYOUTS) if not k else 0))
        path = directory / f"{k}-{name.replace(' ', '-').replace(',', '')}.log"
        path.write_text("\n".join(text) + "\n")
        out.append((path, len(text), records))
    index.write_text(json.dumps([(path.name, count, records) for path, count, records in out]))
    return out
