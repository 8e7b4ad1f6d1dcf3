"""The logging setups of the ML ecosystem, by name: what a training script gets when it logs the way
a library (or its example scripts) sets logging up. Used by the corpus programs and the scenario
library's torchrun worker, so the parser sees many layouts, each made by the real library.

``setup(name)`` configures logging in this process and returns the logger the script logs through;
it has ``debug/info/warning/error/exception`` taking one preformatted message.
"""

from __future__ import annotations

import logging
import os
import sys
from datetime import datetime, timedelta, timezone
from typing import Any

DASH = "%(asctime)s - %(name)s - %(levelname)s - %(message)s"
# accelerate's and transformers' example scripts (run_clm.py, nlp_example.py …)
EXAMPLES = "%(asctime)s - %(levelname)s - %(name)s - %(message)s"
EXAMPLES_DATEFMT = "%m/%d/%Y %H:%M:%S"


class _RankField(logging.Filter):
    """Puts the process's rank on each record as ``%(rank)s`` (what many training scripts do)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.rank = os.environ.get("RANK", "0")
        return True


def _basic(fmt: str | None = None, datefmt: str | None = None, stream: Any = None, rank: bool = False,
           name: str = "train") -> logging.Logger:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter(fmt or logging.BASIC_FORMAT, datefmt))
    if rank:
        handler.addFilter(_RankField())
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    return logging.getLogger(name)


def _transformers() -> Any:
    """run_clm.py's setup: the script's basicConfig on stdout, transformers' own handler in its
    explicit format (``[INFO|file.py:N] time >> msg``); the script logs through transformers' logging."""
    import transformers.utils.logging as tlog

    _basic(EXAMPLES, EXAMPLES_DATEFMT, sys.stdout, name="__main__")
    tlog.set_verbosity_info()
    tlog.enable_default_handler()
    tlog.enable_explicit_format()
    return tlog.get_logger("transformers.train")


def _deepspeed() -> Any:
    """DeepSpeed's own logger (``[time] [LEVEL] [file:line:func] msg`` on stdout) at INFO, as its
    ``log_level`` setting leaves it."""
    from deepspeed.utils import logger
    from deepspeed.utils.logging import set_log_level_from_string

    set_log_level_from_string("info")
    return logger


def _accelerate() -> Any:
    """accelerate's ``get_logger`` under its examples' basicConfig (``MM/DD/YYYY`` times)."""
    from accelerate import PartialState
    from accelerate.logging import get_logger

    _basic(EXAMPLES, EXAMPLES_DATEFMT)
    PartialState()
    return _AllRanks(get_logger("train", log_level="INFO"))


class _AllRanks:
    """accelerate's logger logs on the main process only unless told otherwise: every rank logs here."""

    def __init__(self, adapter: Any) -> None:
        self._adapter = adapter

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._adapter, name)
        return lambda msg, *a, **k: method(msg, *a, main_process_only=False, **k)


def _glog() -> logging.Logger:
    """torch's own glog-style formatter (``I1207 11:05:59.602000 1234 file.py:12] [rank1]: msg``), the one
    torchrun and torch.distributed's Python modules print with."""
    from torch._logging._internal import TorchLogsFormatter

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TorchLogsFormatter())
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    return logging.getLogger("train")


def _rich() -> logging.Logger:
    from rich.logging import RichHandler

    logging.basicConfig(level=logging.INFO, format="%(message)s", handlers=[RichHandler()], force=True)
    return logging.getLogger("train")


def _loguru() -> Any:
    """loguru's default layout to stderr; its records reach the truth sidecar through a patcher."""
    from loguru import logger

    from tests.corpus import sidecar

    def note(record: dict[str, Any]) -> None:
        sidecar.pending(level=record["level"].name, levelno=record["level"].no, logger=record["name"],
                        created=record["time"].timestamp(), time_us=_micros(record["time"]), time_shown=True, precision="ms",
                        level_shown=True, logger_shown=True, rank_shown=False, handler="loguru")

    logger.remove()
    logger.configure(patcher=note)
    logger.add(sys.stderr, level="INFO", colorize=False)
    return logger


def _structlog() -> Any:
    """structlog's default console renderer (no colours) with ISO times."""
    import structlog

    from tests.corpus import sidecar

    def note(_: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
        level = {"warn": "WARNING", "exception": "ERROR"}.get(method, method.upper())
        sidecar.pending(level=level, levelno=logging.getLevelName(level), logger=event.get("logger"),
                        created=event["_created"].timestamp(), time_us=_micros(event["_created"]), time_shown=True,
                        precision="us", level_shown=True,
                        logger_shown=False, rank_shown=False, handler="structlog")
        return event

    def created(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
        event["_created"] = datetime.now(timezone.utc)
        return event

    def stamp(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
        event["timestamp"] = event.pop("_created").isoformat()
        return event

    structlog.configure(processors=[structlog.processors.add_log_level, created, note,
                                    structlog.processors.format_exc_info, stamp,
                                    structlog.dev.ConsoleRenderer(colors=False)],
                        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr))
    return structlog.get_logger()


def _micros(moment: datetime) -> int:
    """A datetime as UTC microseconds, exactly (no float on the way)."""
    return (moment - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1)


LAYOUTS = {
    "basic": lambda: _basic(),
    "dash": lambda: _basic(DASH),
    "bracketed": lambda: _basic("[%(asctime)s] [%(levelname)s] [rank%(rank)s] %(name)s: %(message)s", rank=True),
    "timeonly": lambda: _basic("%(asctime)s %(levelname)-8s %(name)s %(message)s", "%H:%M:%S"),
    "examples": lambda: _basic(EXAMPLES, EXAMPLES_DATEFMT),
    "legacy": lambda: _basic("%(asctime)s %(levelname)s %(name)s: %(message)s"),
    "transformers": _transformers,
    "deepspeed": _deepspeed,
    "accelerate": _accelerate,
    "glog": _glog,
    "rich": _rich,
    "loguru": _loguru,
    "structlog": _structlog,
}


def setup(name: str) -> Any:
    """Configure this process's logging as layout `name` does; the logger to log through."""
    try:
        return LAYOUTS[name]()
    except KeyError:
        raise SystemExit(f"unknown layout {name!r}; known: {', '.join(LAYOUTS)}") from None
