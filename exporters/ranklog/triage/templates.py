"""Collapse 1000 variations of one error into one template, and 1000 ranks into `0-4,6-63`.

A template is the first line of a message with everything that varies between ranks masked:
timestamps, IP addresses, paths, hex ids, rank numbers and other numbers. Two ranks printing the
same NCCL watchdog timeout for their own SeqNum, pid and device end up with the same template, so
the one line that differs (the OOM) stands out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_TEMPLATE_CHARS = 240

# One pass over the line with one alternation; at each position the first alternative that
# matches wins, so wider patterns come first (a path's digits are not masked as numbers).
_PARTS: tuple[tuple[str, str], ...] = (
    ("ts", r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"),
    ("uuid", r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
    ("ip", r"\[?\b(?:\d{1,3}\.){3}\d{1,3}\b\]?(?::\d+)?"),
    ("path", r"(?:[A-Za-z]:)?(?:/[\w.@+\-]+){2,}/?|(?:\.{1,2})?(?:/[\w.@+\-]+)+\.\w+"),
    ("hex", r"\b0x[0-9a-fA-F]+\b"),
    ("id", r"\b(?=[0-9a-fA-F]*\d)(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b"),
    ("rank", r"\b(?:[Rr]ank|RANK|local_rank|LOCAL_RANK)\s*[=:]?\s*\d+"),
    ("num", r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"),
    ("suffix", r"(?<=[A-Za-z_])\d+\b"),
)
_MASK = re.compile("|".join(f"(?P<{name}>{pattern})" for name, pattern in _PARTS))
_REPLACEMENT = {"ts": "<ts>", "uuid": "<id>", "ip": "<ip>", "path": "<path>", "hex": "<hex>", "id": "<id>",
                "num": "<n>", "suffix": "<n>"}
_RANK_DIGITS = re.compile(r"\d+$")
_SPACES = re.compile(r"\s+")
_SCAN_CHARS = 2 * MAX_TEMPLATE_CHARS  # masking never makes a line longer than this matters for


def _replace(match: re.Match[str]) -> str:
    kind = match.lastgroup or ""
    if kind == "rank":
        return _RANK_DIGITS.sub("<r>", match.group(0))
    return _REPLACEMENT[kind]


def template_of(message: str | None) -> str:
    """The masked first non-empty line of `message` (at most :data:`MAX_TEMPLATE_CHARS` chars).

    Lines that differ only in their digits (1000 ranks' timeouts, a warning with a number) share
    one masking pass through a cache keyed on the line with digit runs collapsed; the masking is
    what costs, the key is one cheap substitution.
    """
    if not message:
        return ""
    line = next((part for part in message.splitlines() if part.strip()), "")[:_SCAN_CHARS]
    key = _DIGITS.sub("0", line)
    cached = _CACHE.get(key)
    if cached is None:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.clear()
        masked = _SPACES.sub(" ", _MASK.sub(_replace, line)).strip()
        cached = _CACHE[key] = (masked if len(masked) <= MAX_TEMPLATE_CHARS
                                else masked[: MAX_TEMPLATE_CHARS - 1] + "…")
    return cached


def mask_line(line: str, wildcard: str | None = None) -> str:
    """`line` with the parts that vary masked as :func:`template_of` masks them, its spacing kept;
    every mask is `wildcard` when given (the archive's Loki patterns use ``<_>``)."""
    if wildcard is None:
        return _MASK.sub(_replace, line)
    return _MASK.sub(lambda match: _RANK_DIGITS.sub(wildcard, match.group(0)) if match.lastgroup == "rank"
                     else wildcard, line)


_DIGITS = re.compile(r"\d+")
_CACHE: dict[str, str] = {}
_CACHE_SIZE = 8192


def format_ranks(ranks: Iterable[int | None]) -> str:
    """Compact rank set: `0-4,6-63` (ranks that are None, i.e. rank-less processes, are left out)."""
    values = sorted({int(r) for r in ranks if r is not None})
    if not values:
        return ""
    parts: list[str] = []
    start = prev = values[0]
    for value in values[1:]:
        if value == prev + 1:
            prev = value
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = value
    parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ",".join(parts)


def describe_ranks(ranks: Iterable[int | None]) -> str:
    """`rank 5` or `ranks 0-4,6-15`; empty when there is no rank."""
    values = sorted({int(r) for r in ranks if r is not None})
    if not values:
        return ""
    return f"rank {values[0]}" if len(values) == 1 else f"ranks {format_ranks(values)}"
