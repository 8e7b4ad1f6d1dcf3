"""Sampling of chatty levels, with the rate recorded so counts can be reconstructed.

``SamplingFilter(rate=0.1)`` keeps about one record in ten of the levels it is given (INFO by
default) and marks each kept record with ``sample_rate`` (0.1): an estimate of the original count
is ``sum(1 / sample_rate)``. WARNING and above are never sampled, whatever ``levels`` says —
failures must always reach the archive. Records of other levels pass untouched (no
``sample_rate``). Works as a :class:`logging.Filter` on stdlib loggers and handlers and on
``ranklog.get_logger`` loggers (``logger.addFilter(SamplingFilter(0.1))``), where it runs on the
fast path without building a :class:`logging.LogRecord`.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable

from ..record import normalize_level


class SamplingFilter(logging.Filter):
    def __init__(self, rate: float = 0.1, levels: Iterable[str | int] = ("INFO",), seed: int | None = None) -> None:
        super().__init__()
        if not 0.0 < rate <= 1.0:
            raise ValueError(f"sampling rate must be in (0, 1], got {rate!r}")
        self.rate = float(rate)
        numbers = {logging.getLevelName(normalize_level(level)) if not isinstance(level, int) else level
                   for level in levels}
        self.levelnos = frozenset(n for n in numbers if isinstance(n, int) and n < logging.WARNING)
        self._random = random.Random(seed).random if seed is not None else random.random

    def decide(self, levelno: int) -> float | bool | None:
        """False to drop; the rate to record for a kept sampled record; None when not sampled."""
        if levelno not in self.levelnos:
            return None
        return self.rate if self._random() < self.rate else False

    def filter(self, record: logging.LogRecord) -> bool:
        decision = self.decide(record.levelno)
        if decision is False:
            return False
        if decision is not None:
            record.sample_rate = decision
        return True
