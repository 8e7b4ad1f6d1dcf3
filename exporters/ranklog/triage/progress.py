"""Each rank's way through the training steps, from the one summary scan triage makes anyway.

The summary scan (:meth:`.gather.TriageData.summary`) groups records by process *and* by step bucket
(``step // width``; ``width`` keeps a rank to at most :data:`MAX_BUCKETS` buckets: one step each for
runs of up to 64 steps, longer runs at that resolution). Per bucket: the first and last record's
time, the lowest and highest step, and the mean of a per-step duration field when the records
carry one (:mod:`ranklog.step_durations`: the logger's ``extra={"compute_time": …}``, JSON lines'
``step_time``, ``time/step``…). The per-process summary is summed from these rows, so the records
are read once.

What uses it: the straggler analysis (:mod:`.straggler`), and whether a rank got past an error
(:meth:`StepMatrix.went_on`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..step_durations import DurationKey, best_key

if TYPE_CHECKING:
    import duckdb
    import numpy as np
    import pyarrow as pa

MAX_BUCKETS = 64  # 1000 ranks x 64 buckets keep the summary scan's grouping cheap (+0.25 s CPU on 10 M records)
KEY_SAMPLE_ROWS = 2000  # records with attrs and a step looked at to find the duration fields


def duration_keys(con: duckdb.DuckDBPyConnection, view: str, where: str) -> list[DurationKey]:
    """The duration field to read, when some records of `view` carry one: a compute-like one first
    (one key: a bucket's mean must not mix a rank's compute time with its step time)."""
    rows = con.execute(f"""
        SELECT DISTINCT unnest(json_keys(attrs)) FROM (
            SELECT attrs FROM {view} {where} {"AND" if where else "WHERE"} attrs IS NOT NULL AND step IS NOT NULL
            LIMIT {KEY_SAMPLE_ROWS})""").fetchall()
    key = best_key(name for (name,) in rows)
    return [key] if key is not None else []


def step_width(con: duckdb.DuckDBPyConnection, view: str, where: str) -> int:
    """Steps per bucket so that a rank has at most :data:`MAX_BUCKETS` of them."""
    low, high = con.execute(f"SELECT min(step), max(step) FROM {view} {where}").fetchone()
    if low is None:
        return 1
    return max(1, -(-(int(high) - int(low) + 1) // MAX_BUCKETS))


def seconds_sql(keys: list[DurationKey]) -> str:
    """SQL for a bucket's mean duration per step in seconds (the first of `keys` a record has), or NULL."""
    if not keys:
        return "NULL::DOUBLE"  # no aggregate over every record for nothing
    parts = [f"TRY_CAST(json_extract_string(attrs, '$.\"{k.name}\"') AS DOUBLE) * {k.scale}" for k in keys]
    return f"avg({f'coalesce({chr(44).join(parts)})' if len(parts) > 1 else parts[0]})"


PROGRESS_COLUMNS = ("job", "host", "rank", "local_rank", "pid", "bucket", "n", "first_ns", "last_ns", "step_lo",
                    "step_hi", "seconds")


def progress_sql(view: str, where: str, width: int, keys: list[DurationKey]) -> str:
    """The summary scan: one row per process and step bucket (see the module docstring). Times are
    aggregated as timestamps and converted once per group, not once per record."""
    return f"""
        SELECT job, host, rank, local_rank, pid, step // {width} AS bucket, count(*) AS n,
               epoch_ns(min(ts)) AS first_ns, epoch_ns(max(ts)) AS last_ns, min(step) AS step_lo,
               max(step) AS step_hi, {seconds_sql(keys)} AS seconds
        FROM {view} {where}
        GROUP BY job, host, rank, local_rank, pid, bucket"""


def roles_sql(view: str, where: str) -> str:
    """Each process's fullest role (a Ray actor's name over its class), apart: only records with a
    role are read, which Parquet's statistics skip wholesale when a run has none."""
    return f"""
        SELECT job, host, rank, local_rank, pid, arg_max(role, length(role)) AS role FROM {view}
        {where} {"AND" if where else "WHERE"} role IS NOT NULL GROUP BY job, host, rank, local_rank, pid"""


@dataclass
class Progress:
    """The step buckets of the processes a verdict judges (an Arrow table of :data:`PROGRESS_COLUMNS`
    rows with a step), and what the durations were read from."""

    table: pa.Table
    width: int
    keys: list[DurationKey]


@dataclass
class StepMatrix:
    """Ranks × step buckets: when each rank's bucket began (seconds after `base_ns`, clock-corrected),
    its mean duration field, and each bucket's lowest step."""

    keys: list[tuple[str, int]]  # (host, rank) per row
    steps: np.ndarray  # the lowest step of each bucket (column)
    started: np.ndarray  # rows × columns, NaN where the rank has no record in the bucket
    seconds: np.ndarray  # rows × columns, NaN where none
    base_ns: int = 0
    _rows: dict[tuple[str, int], int] | None = None

    def went_on(self, host: str, rank: int | None, corrected_ns: int, margin_ns: int) -> bool:
        """Whether `rank` began a later step clearly after the moment `corrected_ns` (clock-corrected; more
        than `margin_ns` after it, so that lines stamped to the second or a dying rank's last words
        do not count): it got past whatever happened then."""
        import numpy as np

        if self._rows is None:
            self._rows = {key: row for row, key in enumerate(self.keys)}
        row = self._rows.get((host, rank)) if rank is not None else None
        if row is None:
            return False
        started = self.started[row]
        moment = (corrected_ns - self.base_ns) / 1e9
        seen = np.isfinite(started)
        before = self.steps[seen & (started <= moment)]
        after = self.steps[seen & (started > moment + margin_ns / 1e9)]
        return bool(after.size) and (not before.size or after.max() > before.max())


def step_matrix(progress: Progress | None, single_host: bool, offsets: dict[str, int]) -> StepMatrix | None:
    """The step buckets as ranks × buckets matrices (vectorized: a 1000-rank job has 64,000 of them)."""
    if progress is None or progress.table.num_rows == 0:
        return None
    import numpy as np
    import pyarrow.compute as pc

    t = progress.table
    rank = t["rank"] if not single_host else pc.coalesce(t["rank"], t["local_rank"])
    keep = pc.is_valid(rank)
    t, rank = t.filter(keep), rank.filter(keep)
    if t.num_rows == 0:
        return None
    hosts = pc.dictionary_encode(t["host"].combine_chunks())  # never null in a record
    names = hosts.dictionary.to_pylist()
    host_index = _numpy(hosts.indices)
    rank_values = _numpy(rank)
    low = int(rank_values.min())
    span = int(rank_values.max()) - low + 1
    pairs, row = np.unique(host_index * span + (rank_values - low), return_inverse=True)
    buckets, col = np.unique(_numpy(t["bucket"]), return_inverse=True)
    keys = [(names[int(pair // span)], int(pair % span) + low) for pair in pairs]
    shift = np.array([offsets.get(name, 0) for name in names], dtype=np.int64)[host_index]
    first = _numpy(t["first_ns"]) - shift
    base = int(first.min())
    started = np.full((len(keys), len(buckets)), np.inf)
    np.minimum.at(started, (row, col), (first - base) / 1e9)  # a rank's records may sit in several files
    started[np.isinf(started)] = np.nan
    step_lo = np.full(len(buckets), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(step_lo, col, _numpy(t["step_lo"]))
    seconds = _numpy(t["seconds"], "float64")
    known = np.isfinite(seconds)
    total, count = np.zeros(started.shape), np.zeros(started.shape)
    np.add.at(total, (row[known], col[known]), seconds[known])
    np.add.at(count, (row[known], col[known]), 1)
    with np.errstate(all="ignore"):
        mean = np.where(count > 0, total / count, np.nan)
    return StepMatrix(keys, step_lo, started, mean, base)


def _numpy(values, dtype: str = "int64"):
    """An Arrow column of numbers as a numpy array of `dtype` (nulls: NaN or 0), read from its buffers
    (pyarrow's own conversions, and any Python scalar handed to it, import pandas: 0.6 s a triage does
    not need)."""
    import numpy as np
    import pyarrow.compute as pc

    array = pc.cast(values.combine_chunks() if hasattr(values, "combine_chunks") else values, dtype)
    out = np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array),
                        offset=array.offset * np.dtype(dtype).itemsize).copy()
    if array.null_count:
        bits = np.unpackbits(np.frombuffer(array.buffers()[0], dtype=np.uint8), bitorder="little")
        out[~bits[array.offset:array.offset + len(array)].astype(bool)] = np.nan if dtype == "float64" else 0
    return out
