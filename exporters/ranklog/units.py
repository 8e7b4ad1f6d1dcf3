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


def parse_size(value: str | int | float) -> int:
    """Bytes from `1GB`, `512MiB`, `64k` or a plain number (decimal units are powers of 1000)."""
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, (int, float)):
        return int(value)
    match = _NUMBER_UNIT.match(value)
    if not match or match.group(2).lower() not in _SIZE_UNITS:
        raise ValueError(f"not a size: {value!r} (use e.g. 512MB, 1GiB, 4096)")
    return int(float(match.group(1)) * _SIZE_UNITS[match.group(2).lower()])


def parse_duration(value: str | int | float) -> float:
    """Seconds from `7d`, `2h`, `30s`, `250ms` or a plain number of seconds."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    match = _NUMBER_UNIT.match(value)
    if not match or match.group(2).lower() not in _DURATION_UNITS:
        raise ValueError(f"not a duration: {value!r} (use e.g. 250ms, 30s, 5m, 2h, 7d)")
    return float(match.group(1)) * _DURATION_UNITS[match.group(2).lower()]


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
