"""Which structured fields hold a rank's time per training step (shared by the agent's
``ranklog_rank_step_seconds`` and triage's straggler analysis).

A key of a record's ``attrs`` is a duration per step when its name joins a compute- or step-like
word with a unit of time: ``compute_time``, ``fwd_bwd_ms``, ``step_time``, ``time/step``,
``timing_s/step``, ``iteration_time_s`` … (``step`` alone is a counter, ``compute`` alone says no
unit). Compute-like keys come first: in a synchronous job every rank's *step* takes as long as the
slowest one's, while its *compute* time is its own — what tells a straggler from its peers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DURATION_KEY = re.compile(
    r"(?i)^(?:[\w.]*[/_.])?(?P<what>compute|fwd_bwd|forward_backward|fwd|forward|bwd|backward|step|train_step|iter|"
    r"iteration|batch)(?:[_ /.-]?(?:time|duration|latency))?(?:[_ /.-]?(?P<unit>s|secs?|seconds|ms))?$"
    r"|^(?:[\w.]*[/_.])?time[_/](?:per[_/])?(?P<what2>step|iter|iteration|batch)(?:[_ /.-]?(?P<unit2>s|ms))?$")
_TIMELY = re.compile(r"(?i)tim(?:e|ing)|duration|latency|(?:^|[_ /.-])(?:s|secs?|seconds|ms)$")
_COMPUTE = ("compute", "fwd_bwd", "forward_backward", "fwd", "forward", "bwd", "backward")
_BARE = frozenset({"step", "train_step", "iter", "iteration", "batch"})
# A cheap test of a record's attrs text before it is decoded: a key that may be a duration, with a number.
ATTRS_HINT = r'(?i)"[^"]*(?:tim(?:e|ing)|duration|latency|_ms|_s)"\s*:\s*-?[0-9]'


@dataclass(frozen=True)
class DurationKey:
    name: str
    scale: float  # to seconds
    compute: bool  # a compute-like time (differs between ranks of a synchronous job)


def duration_key(name: str) -> DurationKey | None:
    """`name` as a per-step duration field, or None."""
    if name.lower() in _BARE:
        return None
    found = DURATION_KEY.match(name)
    if found is None or not _TIMELY.search(name):
        return None
    what = (found["what"] or found["what2"] or "").lower()
    unit = (found["unit"] or found["unit2"] or "s").lower()
    return DurationKey(name, 0.001 if unit == "ms" else 1.0, what in _COMPUTE)


def best_key(names) -> DurationKey | None:
    """The duration field to read among `names`: compute-like first, then by name (stable)."""
    keys = [key for key in (duration_key(name) for name in names if name) if key is not None]
    return min(keys, key=lambda k: (not k.compute, k.name)) if keys else None
