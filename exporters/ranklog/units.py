"""Human-friendly sizes and durations ("1GB", "7d") shared by configs and flags. Stdlib only."""

from __future__ import annotations

import re

_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3, "t": 1000**4, "tb": 1000**4,
    "ki": 1024, "kib": 1024, "mi": 1024**2, "mib": 1024**2, "gi": 1024**3, "gib": 1024**3, "ti": 1024**4, "tib": 1024**4,
}
_DURATION_UNITS = {"ms": 0.001, "s": 1, "": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_NUMBER_UNIT = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")
# One term of a compound duration (`1h30m`, `2d 12h`, `1m30.5s`): a number and a unit.
_DURATION_TERM = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]+)")


def _number_with_unit(value: str | int | float, units: dict[str, float], kind: str, examples: str) -> float:
    """`value` × its unit's scale; a bare number is taken in the base unit (bytes, seconds)."""
    if isinstance(value, bool):
        raise ValueError(f"not a {kind}: {value!r}")
    if isinstance(value, (int, float)):
        return value
    match = _NUMBER_UNIT.match(value)
    if not match or match.group(2).lower() not in units:
        raise ValueError(f"not a {kind}: {value!r} (use e.g. {examples})")
    return float(match.group(1)) * units[match.group(2).lower()]


def parse_size(value: str | int | float) -> int:
    """Bytes from `1GB`, `512MiB`, `64k` or a plain number (decimal units are powers of 1000)."""
    return int(_number_with_unit(value, _SIZE_UNITS, "size", "512MB, 1GiB, 4096"))


def parse_duration(value: str | int | float) -> float:
    """Seconds from `7d`, `2h`, `30s`, `250ms`, a compound like `1h30m` or `2d 12h` (Go's and
    Prometheus' spelling: the terms are added), or a plain number of seconds."""
    examples = "250ms, 30s, 5m, 1h30m, 7d"
    if isinstance(value, str) and not _NUMBER_UNIT.match(value):
        terms = list(_DURATION_TERM.finditer(value))
        if terms and "".join(t.group(0) for t in terms).strip() == value.strip() and len(terms) > 1 \
                and all(t.group(2).lower() in _DURATION_UNITS for t in terms):
            return sum(float(t.group(1)) * _DURATION_UNITS[t.group(2).lower()] for t in terms)
    return float(_number_with_unit(value, _DURATION_UNITS, "duration", examples))


def format_size(n: int) -> str:
    """`n` bytes in the unit that states it exactly with the fewest digits (`1GiB`, `64MB`): what help shows."""
    exact = [f"{n // scale}{unit}" for unit, scale in (
        ("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024),
        ("TB", 1000**4), ("GB", 1000**3), ("MB", 1000**2), ("kB", 1000)) if n >= scale and n % scale == 0]
    return min(exact, key=len) if exact else str(n)


def format_duration(seconds: float) -> str:
    """`seconds` in the largest unit that states it exactly (`7d`, `90s`, `250ms`)."""
    for unit, scale in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= scale and seconds % scale == 0:
            return f"{int(seconds // scale)}{unit}"
    if seconds == 0:
        return "0s"
    millis = seconds * 1000
    return f"{millis:g}ms" if millis == int(millis) else f"{seconds:g}s"
