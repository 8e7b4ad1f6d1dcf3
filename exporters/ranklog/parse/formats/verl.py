"""verl formats.

- ``verl-console``: verl's console logger output, ``step:12 - actor/pg_loss:0.123 - perf/throughput:1532.1
  - …`` lines → ``step`` + ``attrs.metrics`` (shape in :mod:`.steps`); the other lines of the file
  (Ray, Python logging, prints, tracebacks) are parsed like the :mod:`.ray` format, since verl runs
  on Ray and its console carries Ray's ``(TaskRunner pid=…)`` prefixes.
- ``verl-jsonl``: verl's file logger, one ``{"step": N, "data": {"actor/pg_loss": 0.12, …}}`` per
  line → one record per line with ``step``, msg ``step N``, level INFO and ``attrs.metrics`` = data
  (non-finite numbers as strings, as for the console). verl writes it with orjson, which turns NaN
  and Inf into ``null``: a ``null`` metric is read as ``"nan"`` (non-finite), and the message names
  the non-finite metrics (``step 4 - actor/grad_norm:nan - actor/pg_loss:nan``) so that the line
  reads like the console's and the failure signatures see it. Recognised by name (``*metric*.jsonl``) or
  by its first line (:mod:`.detect`).
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..batch import replace_columns
from ..contract import ParseResult
from ..json_bulk import parse_json_lines
from .ray import parse_ray, parse_ray_many

if TYPE_CHECKING:
    from ..contract import SourceContext

VERL_JSONL_MAPPING = {"step": ("step",), "ts": ("ts", "timestamp", "time")}


def parse_verl_console(data: bytes, base_offset: int, ctx: SourceContext, *, final: bool,
                       read_time_ns: int) -> ParseResult:
    return parse_ray(data, base_offset, ctx, final=final, read_time_ns=read_time_ns)


def parse_verl_jsonl(data: bytes, base_offset: int, ctx: SourceContext, *, final: bool, read_time_ns: int) -> ParseResult:

    result = parse_json_lines(data, base_offset, ctx, final=final, read_time_ns=read_time_ns,
                              mapping=VERL_JSONL_MAPPING, extras_hook=_metrics_attrs)
    batch = result.batch
    if batch.num_rows:
        structured = pc.not_equal(batch.column("format"), "text")
        step_text = pc.binary_join_element_wise("step ", batch.column("step").cast(pa.string()),
                                                _nonfinite_suffix(batch.column("attrs")), "")
        msg = pc.if_else(pc.and_(structured, pc.is_valid(step_text)), step_text, batch.column("msg"))
        level = pc.if_else(pc.and_(structured, pc.equal(batch.column("level"), "UNKNOWN")), "INFO",
                           batch.column("level"))
        batch = replace_columns(batch, {"msg": msg, "level": level})
    return ParseResult(batch, result.consumed, result.errors)


def _metrics_attrs(extras: dict[str, Any]) -> dict[str, Any]:
    data = extras.pop("data", None)
    if isinstance(data, dict):
        extras["metrics"] = {name: _json_number(value) for name, value in data.items()}
    elif data is not None:
        extras["data"] = data
    return extras


def _nonfinite_suffix(attrs: pa.Array) -> pa.Array:
    """`` - name:nan - …`` for the rows whose metrics hold non-finite values, else ``""``."""
    flagged = pc.fill_null(pc.match_substring_regex(attrs, r'"(?:nan|-?inf)"'), False)
    suffix = [""] * len(attrs)
    for i in np.flatnonzero(np.asarray(flagged)).tolist():
        metrics = json.loads(attrs[i].as_py()).get("metrics") or {}
        bad = [f"{name}:{value}" for name, value in metrics.items() if value in ("nan", "inf", "-inf")]
        suffix[i] = "".join(f" - {text}" for text in bad)
    return pa.array(suffix, pa.string())


def _json_number(value: Any) -> Any:
    if value is None:
        return "nan"  # orjson's spelling of NaN and Inf
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


PARSERS = {"verl-console": parse_verl_console, "verl-jsonl": parse_verl_jsonl}
PARSERS_MANY = {"verl-console": parse_ray_many}
