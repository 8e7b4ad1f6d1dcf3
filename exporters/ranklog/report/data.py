"""The figures behind the HTML report, computed in DuckDB over the same selection triage used.

- log volume per node over time: record counts per host in about :data:`TIME_BUCKETS` buckets;
- training curves read from the logs: loss and throughput per step, averaged over ranks. Values
  come from `attrs` when present — the logger's ``extra=`` fields at its top level
  (``log.info("step done", extra={"loss": l})``) or under ``data``/``metrics`` (verl JSONL), read
  as the agent's ``ranklog_training_metric`` reads them, whatever the message says — else from the
  text (``loss 0.25``, ``loss=0.25``, verl's ``step:12 - actor/pg_loss:0.25 - perf/throughput:1532``).
  The step is the record's `step`, else ``step N`` / ``step:N`` in the text. Non-finite values
  are kept apart (they are marked on the plot, not drawn as a line).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ..record import METRIC_CONTAINERS
from ..triage.gather import TriageData

TIME_BUCKETS = 120
_NUMBER = r"(-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|nan|NaN|-?inf)"
_LOSS_TEXT = r"(?:^|[\s/_-])(?:pg_)?loss[=: ]+" + _NUMBER
_TPUT_TEXT = r"(?:throughput|tokens_per_sec|tokens/s)[=: ]+" + _NUMBER
_STEP_TEXT = r"\bstep[=: ]+([0-9]+)"
_LOSS_ATTRS = ("loss", "actor/pg_loss", "train/loss", "training/loss", "train_loss")
_TPUT_ATTRS = ("throughput", "perf/throughput", "tokens_per_second")
# Records whose attrs may hold one of them (a cheap test before the JSON is read).
_METRIC_KEYS = "|".join(re.escape(json.dumps(key)) for key in _LOSS_ATTRS + _TPUT_ATTRS)


def corrected_ts_sql(offsets: dict[str, int]) -> str:
    """SQL for a record's time in ns corrected by its host's clock offset (see triage.evidence)."""
    if not offsets:
        return "epoch_ns(ts)"
    cases = " ".join(f"WHEN {_sql_string(host)} THEN {int(offset)}" for host, offset in offsets.items())
    return f"(epoch_ns(ts) - CASE host {cases} ELSE 0 END)"


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def volume_by_node(data: TriageData, offsets: dict[str, int] | None = None) -> dict[str, Any]:
    """{'start_ns', 'bucket_ns', 'hosts': {host: [count per bucket]}}, in clock-corrected time."""
    ts = corrected_ts_sql(offsets or {})
    bounds = data.query(f"SELECT min({ts}), max({ts}) FROM records")
    low, high = bounds[0]
    if low is None:
        return {"start_ns": 0, "bucket_ns": 1, "hosts": {}}
    bucket = max(1_000_000_000, -(-(int(high) - int(low) + 1) // TIME_BUCKETS))
    rows = data.query(f"SELECT host, ({ts} - {int(low)}) // {bucket} AS b, count(*) FROM records "
                      "GROUP BY 1, 2 ORDER BY 1, 2")
    buckets = int((int(high) - int(low)) // bucket) + 1
    hosts: dict[str, list[int]] = {}
    for host, index, count in rows:
        hosts.setdefault(host or "?", [0] * buckets)[int(index)] = int(count)
    return {"start_ns": int(low), "bucket_ns": bucket, "hosts": hosts}


def _attr_number(keys: tuple[str, ...]) -> str:
    """The first of `keys` found in attrs (top level first, then each metric container), as a number."""
    scopes = ["$"] + [f"$.{container}" for container in METRIC_CONTAINERS]
    parts = [f"TRY_CAST(json_extract_string(attrs, '{scope}.\"{key}\"') AS DOUBLE)"
             for scope in scopes for key in keys]
    return "coalesce(" + ", ".join(parts) + ")"


def training_curves(data: TriageData) -> dict[str, list[list[float | None]]]:
    """{'loss': [[step, mean, nonfinite_count], …], 'throughput': […]} per step, over all ranks."""
    loss_attr, tput_attr = _attr_number(_LOSS_ATTRS), _attr_number(_TPUT_ATTRS)
    sql = f"""
        WITH raw AS (
            SELECT coalesce(step, TRY_CAST(regexp_extract(msg, '{_STEP_TEXT}', 1) AS BIGINT)) AS s,
                   coalesce({loss_attr}, TRY_CAST(regexp_extract(msg, '{_LOSS_TEXT}', 1) AS DOUBLE)) AS loss,
                   coalesce({tput_attr}, TRY_CAST(regexp_extract(msg, '{_TPUT_TEXT}', 1) AS DOUBLE)) AS tput
            FROM records WHERE regexp_matches(msg, '(?i)loss|throughput|tokens')
               OR (attrs IS NOT NULL AND regexp_matches(attrs, {_sql_string(_METRIC_KEYS)}))
        )
        SELECT s,
               avg(loss) FILTER (WHERE isfinite(loss)), count(*) FILTER (WHERE loss IS NOT NULL AND NOT isfinite(loss)),
               avg(tput) FILTER (WHERE isfinite(tput)), count(*) FILTER (WHERE tput IS NOT NULL AND NOT isfinite(tput))
        FROM raw WHERE s IS NOT NULL AND (loss IS NOT NULL OR tput IS NOT NULL)
        GROUP BY s ORDER BY s
    """
    loss, tput = [], []
    for step, loss_mean, loss_bad, tput_mean, tput_bad in data.query(sql):
        if loss_mean is not None or loss_bad:
            loss.append([int(step), _finite(loss_mean), int(loss_bad)])
        if tput_mean is not None or tput_bad:
            tput.append([int(step), _finite(tput_mean), int(tput_bad)])
    return {"loss": loss, "throughput": tput}


def _finite(value: float | None) -> float | None:
    return round(value, 6) if value is not None and math.isfinite(value) else None
