"""Stragglers and slow-downs: a rank that got slower than its peers, or a whole job that got slower.

Slow ranks are the most frequent problem at scale, and they leave no error: the run goes on, every
rank's step waits for the slowest at the next collective. Two views of each rank's steps, from the
step buckets of the summary scan (:mod:`.progress`):

- **its own duration per step**, when its records carry one (``compute_time``, ``fwd_bwd_ms``,
  ``step_time`` …): compared with the median of all ranks at the same step. A rank's *relative score*
  is its peers' time over its own (1 = as fast as the peers; NVIDIA's Resiliency Extension flags a
  rank below :data:`RELATIVE_SCORE` = 0.75 — the threshold here too, for every layout).
- **the timing of its step lines** otherwise: in a synchronous job every rank's step takes as long
  as the slowest one's, but a rank that computes longer writes what it writes before the collective
  later than its peers. Its lag behind the peers' median, from a change point on, over the job's
  usual step time gives the same score (a lag of a third of a step is a score of 0.75). Lags are
  measured against the rank's own lag before (constant clock offsets between hosts cancel), so a
  rank slow from its very first step shows only in a duration field.

A rank is a straggler from the first step (the change point) after which at least
:data:`PERSIST` of its steps, and :data:`MIN_SLOW` at least, are below the score, by
:data:`MIN_EXTRA_S` a step at least (less is a busy machine's scheduling noise); from the timing of
its lines only when the job's steps got slower with it (its peers waited: a synchronous job); the verdict
names the rank with the lowest score over that stretch, its node, the first slow step and how much
slower it is. Without one, a job whose usual step time grew the same way from some step on is a
*slow-down*. Both need :data:`MIN_STEPS` steps seen. The result is status ``degraded`` (exit 3),
never a failure: the run may well end.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .progress import StepMatrix

RELATIVE_SCORE = 0.75
MIN_EXTRA_S = 0.05  # less extra time per step is scheduling noise, and below what line timestamps can tell
MIN_STEPS = 8  # step buckets a job needs before anyone is called slow
MIN_SLOW = 3  # slow buckets after the change point, at least
PERSIST = 0.8  # share of the buckets from the change point on that must be slow


@dataclass(frozen=True)
class Straggler:
    """A rank slower than its peers from `first_step` on (``rank`` None: the whole job got slower)."""

    rank: int | None
    host: str | None
    first_step: int
    score: float  # peers' time / its time over the slow stretch (the job: before / after)
    job_factor: float  # how much longer every step of the job took from `first_step` on
    basis: str  # what the durations were read from
    slow_steps: int

    @property
    def factor(self) -> float:
        """How much slower: its time over its peers' (1 / score)."""
        return 1.0 / self.score if self.score > 0 else float("inf")

    def describe(self) -> str:
        if self.rank is None:
            return (f"every rank's step took {self.job_factor:.1f}x as long from step {self.first_step} on "
                    f"({self.slow_steps} slow step(s); {self.basis})")
        return (f"rank {self.rank} took {self.factor:.1f}x its peers' time per step from step {self.first_step} on "
                f"(relative score {self.score:.2f} < {RELATIVE_SCORE}; {self.slow_steps} slow step(s); {self.basis}); "
                f"the job's steps took {self.job_factor:.1f}x as long")


def find(matrix: StepMatrix | None) -> Straggler | None:
    """The straggler (or the job's slow-down) in the step buckets of `matrix`, or None."""
    if matrix is None or len(matrix.steps) < MIN_STEPS:
        return None
    import numpy as np

    with _quiet():
        period = _period(matrix)
        usual = float(np.nanpercentile(period, 25)) if np.isfinite(period).any() else float("nan")
        if not np.isfinite(usual) or usual <= 0:
            return None
        if len(matrix.keys) >= 2:
            field = np.isfinite(matrix.seconds).mean() >= 0.5
            found = _by_durations(matrix, period, usual) if field else None
            if found is None:
                found = _by_lag(matrix, period, usual)
            if found is not None:
                return found
        return _slow_down(matrix, period, usual)


@contextlib.contextmanager
def _quiet():
    """numpy without its warnings: steps no rank reached are NaN, as meant, and medians of them NaN too."""
    import warnings

    import numpy as np

    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _period(matrix: StepMatrix):
    """The job's time per step at each bucket: the median over ranks of the time between their buckets."""
    import numpy as np

    steps = np.diff(matrix.steps).astype(float)
    per_rank = np.diff(matrix.started, axis=1) / np.where(steps > 0, steps, np.nan)
    period = np.full(matrix.started.shape[1], np.nan)
    period[1:] = np.nanmedian(per_rank, axis=0) if per_rank.size else np.nan
    return period


def _change_point(slow, valid) -> tuple[int, int] | None:
    """The first column from which `slow` holds for PERSIST of the valid columns (MIN_SLOW at least)."""
    import numpy as np

    slow_after = np.cumsum(slow[::-1])[::-1]
    valid_after = np.cumsum(valid[::-1])[::-1]
    ok = slow & (slow_after >= MIN_SLOW) & (slow_after >= PERSIST * np.maximum(valid_after, 1))
    hits = np.flatnonzero(ok)
    return (int(hits[0]), int(slow_after[hits[0]])) if hits.size else None


def _by_durations(matrix: StepMatrix, period, usual: float) -> Straggler | None:
    """A rank whose own duration per step is RELATIVE_SCORE of its peers' or worse, from a change point on."""
    import numpy as np

    peers = np.nanmedian(matrix.seconds, axis=0)
    ratio = matrix.seconds / peers
    valid = np.isfinite(ratio)
    slow = valid & (ratio >= 1.0 / RELATIVE_SCORE) & (matrix.seconds - peers >= MIN_EXTRA_S)
    best: Straggler | None = None
    for row in np.flatnonzero(slow.any(axis=1)):
        found = _change_point(slow[row], valid[row])
        if found is None:
            continue
        start, count = found
        others = np.nanmedian(np.delete(matrix.seconds, row, axis=0)[:, start:], axis=0)
        score = float(np.nanmedian(others / matrix.seconds[row, start:]))
        if np.isfinite(score) and score < RELATIVE_SCORE and (best is None or score < best.score):
            host, rank = matrix.keys[row]
            best = Straggler(rank, host, int(matrix.steps[start]), score, _job_factor(period, start, usual),
                             "its own duration field per step", count)
    return best


def _by_lag(matrix: StepMatrix, period, usual: float) -> Straggler | None:
    """A rank whose step lines fall behind its peers' from some step on, by a third of a usual step or
    more. Its lag is measured against its own before that step (clock offsets cancel); the first
    step is left out (start-up is uneven on every run)."""
    import numpy as np

    lag = matrix.started - np.nanmedian(matrix.started, axis=0)
    lag[:, 0] = np.nan
    threshold = max((1.0 / RELATIVE_SCORE - 1.0) * usual, MIN_EXTRA_S)
    best: Straggler | None = None
    spread = np.nanmax(lag, axis=1) - np.nanmin(lag, axis=1)
    for row in np.flatnonzero(np.nan_to_num(spread) >= threshold):
        behind = lag[row]
        for start in range(2, len(behind) - MIN_SLOW + 1):
            before = behind[1:start][np.isfinite(behind[1:start])]
            if not before.size or not np.isfinite(behind[start]):
                continue
            extra = behind[start:] - np.median(before)
            valid = np.isfinite(extra)
            slow = valid & (extra >= threshold)
            if not slow[0] or slow.sum() < MIN_SLOW or slow.sum() < PERSIST * valid.sum():
                continue
            score = float(np.median(usual / (usual + np.maximum(extra[valid], 0.0))))
            if _job_factor(period, start, usual) < 1.0 / RELATIVE_SCORE:
                break  # its peers did not wait for it: no synchronous step, so its lines' timing says nothing
            if best is None or score < best.score:
                host, rank = matrix.keys[row]
                best = Straggler(rank, host, int(matrix.steps[start]), score, _job_factor(period, start, usual),
                                 "the timing of its step lines against its peers'", int(slow.sum()))
            break
    return best


def _slow_down(matrix: StepMatrix, period, usual: float) -> Straggler | None:
    """The whole job: its usual step time grew by 1/RELATIVE_SCORE or more from a change point on."""
    import numpy as np

    valid = np.isfinite(period)
    slow = valid & (period >= usual / RELATIVE_SCORE) & (period - usual >= MIN_EXTRA_S)
    found = _change_point(slow, valid)
    if found is None:
        return None
    start, count = found
    factor = _job_factor(period, start, usual)
    return Straggler(None, None, int(matrix.steps[start]), 1.0 / factor, factor,
                     "the time between the job's step lines", count)


def _job_factor(period, start: int, usual: float) -> float:
    import numpy as np

    after = period[start:][np.isfinite(period[start:])]
    return float(np.median(after)) / usual if after.size else 1.0


SHOWN_RANKS = 4  # besides the median: the flagged rank and the slowest others


def step_time_series(matrix: StepMatrix | None, flagged: Straggler | None = None) -> dict:
    """Time per step by step (the report's plot): the job's median over ranks and the flagged rank and
    the slowest others, from their duration field or the time between their steps:
    ``{"basis": …, "series": [{"name": …, "points": [[step, seconds], …]}]}``."""
    if matrix is None or len(matrix.steps) < 2:
        return {"basis": None, "series": []}
    import numpy as np

    with _quiet():
        field = np.isfinite(matrix.seconds).mean() >= 0.5
        if field:
            per_rank = matrix.seconds
        else:
            steps = np.diff(matrix.steps).astype(float)
            per_rank = np.full(matrix.started.shape, np.nan)
            per_rank[:, 1:] = np.diff(matrix.started, axis=1) / np.where(steps > 0, steps, np.nan)
        median = np.nanmedian(per_rank, axis=0)
        typical = np.nanmedian(per_rank, axis=1)
    order = [row for row in np.argsort(-np.nan_to_num(typical, nan=-1.0)) if np.isfinite(typical[row])]
    if flagged is not None and flagged.rank is not None and (flagged.host, flagged.rank) in matrix.keys:
        first = matrix.keys.index((flagged.host, flagged.rank))
        order = [first] + [row for row in order if row != first]

    def points(values) -> list[list[float]]:
        return [[int(step), round(float(v), 6)] for step, v in zip(matrix.steps, values, strict=True) if np.isfinite(v)]

    series = [{"name": "median of the ranks", "points": points(median)}]
    series += [{"name": f"rank {matrix.keys[row][1]} ({matrix.keys[row][0]})", "points": points(per_rank[row])}
               for row in order[:SHOWN_RANKS]]
    return {"basis": "duration field" if field else "time between step lines", "series": series}
