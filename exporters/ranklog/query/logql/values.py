"""Loki's value conversions: Prometheus durations (query ranges), Go durations and humanized byte
sizes (label filters and ``unwrap``), numbers as Loki writes them. One definition for the parser, the
label filters and the unwrap stage."""

from __future__ import annotations

import math
import re

_PROM_UNITS = {"ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9, "d": 86400 * 10**9,
               "w": 7 * 86400 * 10**9, "y": 365 * 86400 * 10**9, "ns": 1, "us": 10**3, "µs": 10**3}
_PROM_DURATION = re.compile(r"(\d+)(ns|us|µs|ms|s|m|h|d|w|y)")
# Go's time.ParseDuration (label values): decimal numbers with a unit each, optionally signed.
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
# Duration literals in a query also take d, w, y (Loki's lexer).
_QUERY_UNITS = {**_GO_UNITS, "d": 86400.0, "w": 7 * 86400.0, "y": 365 * 86400.0}
_QUERY_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h|d|w|y)")
# go-humanize's ParseBytes: a number, optional space, a unit (case-insensitive; k = 1000, ki = 1024).
_BYTES_UNITS = {"": 1, "b": 1}
for _power, (_si, _iec) in enumerate((("k", "ki"), ("m", "mi"), ("g", "gi"), ("t", "ti"), ("p", "pi"), ("e", "ei")), 1):
    _BYTES_UNITS.update({_si: 1000**_power, _si + "b": 1000**_power, _iec: 1024**_power, _iec + "b": 1024**_power})
_BYTES = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*$")


def _parts(text: str, pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    """(number, unit) of each part of a duration written as consecutive `pattern` matches; ValueError else."""
    position, parts = 0, []
    for match in pattern.finditer(text):
        if match.start() != position:
            break
        parts.append((match.group(1), match.group(2)))
        position = match.end()
    if position != len(text) or not text:
        raise ValueError(f"not a duration: {text!r}")
    return parts


def prometheus_duration_ns(text: str) -> int:
    """Nanoseconds of a Prometheus duration (``5m``, ``1h30m``, ``250ms``); ValueError otherwise."""
    return sum(int(number) * _PROM_UNITS[unit] for number, unit in _parts(text, _PROM_DURATION))


def _sum_parts(text: str, pattern: re.Pattern[str], units: dict[str, float]) -> float:
    sign, body = (-1.0, text[1:]) if text[:1] == "-" else (1.0, text.removeprefix("+"))
    if body == "0":
        return 0.0
    try:
        return sign * sum(float(number) * units[unit] for number, unit in _parts(body, pattern))
    except ValueError:
        raise ValueError(f"not a duration: {text!r}") from None


def go_duration_seconds(text: str) -> float:
    """Seconds of a Go duration (``1.5h``, ``2h45m``, ``300ms``): how a label value converts."""
    return _sum_parts(text.strip(), _GO_PART, _GO_UNITS)


def query_duration_seconds(text: str) -> float:
    """Seconds of a duration literal in a query (Go units plus d, w, y)."""
    return _sum_parts(text, _QUERY_PART, _QUERY_UNITS)


def bytes_value(text: str) -> float:
    """Bytes of ``42MB``, ``1.5KiB``, ``20 B`` or a plain number; ValueError otherwise."""
    match = _BYTES.match(text)
    if not match or match.group(2).lower() not in _BYTES_UNITS:
        raise ValueError(f"not a byte size: {text!r}")
    return float(match.group(1)) * _BYTES_UNITS[match.group(2).lower()]


def number_value(text: str) -> float:
    """A label value as a float (Go's strconv.ParseFloat: decimal, exponent, Inf, NaN)."""
    value = float(text.strip())  # ValueError for anything else
    return value


def format_sample(value: float) -> str:
    """A sample value as Loki writes it (Go's strconv 'f' -1 formatting; +Inf, -Inf, NaN)."""
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    import numpy as np

    return np.format_float_positional(value, trim="-")


def format_seconds(ns: int) -> int | float:
    """A sample time as Loki writes it: seconds, fractional when not whole."""
    return ns // 10**9 if ns % 10**9 == 0 else ns / 1e9
