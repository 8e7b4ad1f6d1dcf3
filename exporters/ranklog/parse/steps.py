"""verl console step lines: ``step:12 - actor/pg_loss:0.123 - perf/throughput:1532.1 - …``.

Recognised in the message of every text format (verl prints them from its driver/TaskRunner, so they
reach Ray driver logs, Ray worker files and torchrun logs as well as plain console captures). The
record gets ``step`` and ``attrs.metrics`` = {name: number}: finite numbers as JSON numbers,
non-finite ones as the strings ``"nan"``, ``"inf"``, ``"-inf"`` (JSON has no NaN, and a NaN loss is
exactly what triage must see); values that are not numbers go to ``attrs.step_fields``. A value is
read in any repr verl's logger prints (it uses ``pprint.pformat``): ``0.5``, ``nan``, ``inf``,
``np.float64(nan)``, ``np.int32(877)`` (numpy 2), ``tensor(0.5)``, ``tensor(nan, device='cuda:0')``.

Other text lines that name their training step (``step 3 …``, ``Step 12/500``, ``global_step=40``,
``[step 7]``) get ``step`` too, so a traceback's rank has a step to be placed at: the number that
follows the word ``step`` as a word of its own (not ``steps``, ``step_time``, ``timestep``).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .jsontext import PARSE_ERROR_KEY, UNUSABLE_NOTE

STEP_PATTERN = r"^step:\d+ - \S+?:"
# "step 3 micro 0", "Step 12/500", "global_step=40", "[step 7]", "step: 5" (not "steps 3", "timestep 4")
TEXT_STEP = r"(?i)(?:^|[^\w/])(?:global[_ ])?step\s*(?:[:=#]\s*)?\[?(?P<step>\d{1,12})\b"
# TEXT_STEP's own match when it starts the message ("step 12 finished …", the usual spelling): the
# leftmost match, taken by TEXT_STEP's `^` branch, so the same number. Anchored, RE2 extracts it ~3×
# cheaper than the unanchored search (which needs a forward and a backward scan before the groups).
LEADING_STEP = r"(?i)^(?:global[_ ])?step\s*(?:[:=#]\s*)?\[?(?P<step>\d{1,12})\b"
_REPR = re.compile(r"^(?:(?:np|numpy|torch)\.\w+|tensor)\(\s*([^,()]+?)\s*(?:,.*)?\)$")


def _number_text(value: str) -> str:
    """The number inside a numpy/torch repr (``np.float64(nan)`` → ``nan``), else `value` as is."""
    match = _REPR.match(value)
    return match.group(1) if match else value


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
        plain = _number_text(value)
        try:
            number = float(plain)
        except ValueError:
            fields[name] = value
            continue
        if math.isfinite(number):
            metrics[name] = int(number) if number.is_integer() and "." not in plain and "e" not in plain.lower() else number
        else:
            metrics[name] = "nan" if math.isnan(number) else ("inf" if number > 0 else "-inf")
    attrs: dict[str, Any] = {"metrics": metrics}
    if fields:
        attrs["step_fields"] = fields
    return int(step_text), attrs


def extract_steps(msg: pa.Array, step: pa.Array | None, attrs: pa.Array | None) -> tuple[pa.Array | None, pa.Array | None]:
    """`step` and `attrs` columns with the step lines of `msg` folded in (unchanged when none)."""
    step = _text_steps(msg, step)
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


def _text_steps(msg: pa.Array, step: pa.Array | None) -> pa.Array | None:
    """`step` with the steps that plain text lines name filled in where the record has none."""
    if step is not None and step.null_count == 0:
        return step
    mentions = pc.fill_null(pc.match_substring(msg, "step", ignore_case=True), False)
    if not pc.any(mentions).as_py():
        return step
    every = mentions.false_count == 0
    numbers = _step_numbers(msg if every else msg.filter(mentions))
    if not every:
        numbers = pc.replace_with_mask(pa.nulls(len(msg), pa.string()), mentions, numbers)
    parsed = numbers.cast(pa.int64())
    return parsed if step is None else pc.coalesce(step.cast(pa.int64()), parsed)


def _step_numbers(texts: pa.Array) -> pa.Array:
    """The TEXT_STEP number of each text (null where none): LEADING_STEP first, TEXT_STEP for the rest."""
    numbers = pc.struct_field(pc.extract_regex(texts, LEADING_STEP), [0])
    rest = numbers.is_null()
    if rest.true_count:
        others = pc.struct_field(pc.extract_regex(texts.filter(rest), TEXT_STEP), [0])
        numbers = pc.replace_with_mask(numbers, rest, others)
    return numbers
