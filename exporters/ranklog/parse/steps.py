"""verl console step lines: ``step:12 - actor/pg_loss:0.123 - perf/throughput:1532.1 - …``.

Recognised in the message of every text format (verl prints them from its driver/TaskRunner, so they
reach Ray driver logs, Ray worker files and torchrun logs as well as plain console captures). The
record gets ``step`` and ``attrs.metrics`` = {name: number}: finite numbers as JSON numbers,
non-finite ones as the strings ``"nan"``, ``"inf"``, ``"-inf"`` (JSON has no NaN, and a NaN loss is
exactly what triage must see); values that are not numbers go to ``attrs.step_fields``.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .jsontext import PARSE_ERROR_KEY, UNUSABLE_NOTE

STEP_PATTERN = r"^step:\d+ - \S+?:"


def parse_step_line(text: str) -> tuple[int, dict[str, Any]] | None:
    """(step, attrs) from one step line, or None when the line is not one."""
    parts = text.strip().split(" - ")
    head, _, step_text = parts[0].partition(":")
    if head != "step" or not step_text.isdigit():
        return None
    metrics: dict[str, Any] = {}
    fields: dict[str, str] = {}
    for part in parts[1:]:
        name, sep, value = part.partition(":")
        name, value = name.strip(), value.strip()
        if not sep or not name:
            continue
        try:
            number = float(value)
        except ValueError:
            fields[name] = value
            continue
        if math.isfinite(number):
            metrics[name] = int(number) if number.is_integer() and "." not in value and "e" not in value.lower() else number
        else:
            metrics[name] = "nan" if math.isnan(number) else ("inf" if number > 0 else "-inf")
    attrs: dict[str, Any] = {"metrics": metrics}
    if fields:
        attrs["step_fields"] = fields
    return int(step_text), attrs


def extract_steps(msg: pa.Array, step: pa.Array | None, attrs: pa.Array | None) -> tuple[pa.Array | None, pa.Array | None]:
    """`step` and `attrs` columns with the step lines of `msg` folded in (unchanged when none)."""
    candidates = np.asarray(pc.fill_null(pc.starts_with(msg, "step:"), False))
    if not candidates.any():
        return step, attrs
    hits = np.asarray(pc.fill_null(pc.match_substring_regex(msg, STEP_PATTERN), False)) & candidates
    if not hits.any():
        return step, attrs
    n = len(msg)
    steps: list[int | None] = step.to_pylist() if step is not None else [None] * n
    attr_values: list[str | None] = attrs.to_pylist() if attrs is not None else [None] * n
    texts = msg.to_pylist()
    for i in np.flatnonzero(hits).tolist():
        parsed = parse_step_line(texts[i])
        if parsed is None:
            continue
        number, extra = parsed
        if not -(2**63) <= number < 2**63:  # a step beyond int64: kept as text, noted
            extra = {**extra, "step": str(number), PARSE_ERROR_KEY: UNUSABLE_NOTE + "step"}
        elif steps[i] is None:
            steps[i] = number
        if attr_values[i]:
            try:
                own = json.loads(attr_values[i])
                extra = {**own, **extra} if isinstance(own, dict) else extra
            except ValueError:
                pass
        attr_values[i] = json.dumps(extra, separators=(",", ":"), ensure_ascii=False)
    return pa.array(steps, pa.int64()), pa.array(attr_values, pa.string())
