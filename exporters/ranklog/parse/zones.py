"""The zone a time printed without one is read in, and the mark on the records that needed it.

Python's ``logging``, glog, hydra, DeepSpeed and most training scripts print local times without a
zone. Such a time is read in the zone of the machine that wrote it: the agent runs there, so its
default is its own zone (:func:`local_zone`); a folder copied from elsewhere is read with
``--tz`` or a source's ``timezone`` option. Every record whose time was read so carries
``attrs.tz_assumed`` = the zone, so a reader can tell a time the line stated from one the reader
assumed. ISO times with ``Z`` or an offset, epochs, and times inferred from neighbours (they say
``ts_inferred``) carry no such mark.
"""

from __future__ import annotations

import os
from datetime import datetime
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

ATTR = "tz_assumed"
OPTION = "timezone"


@lru_cache(maxsize=1)
def local_zone() -> str:
    """This machine's zone as an IANA name (``TZ``, then ``/etc/localtime``, then ``/etc/timezone``),
    else its current UTC offset (``+01:00``; daylight saving then is not followed)."""
    for name in (os.environ.get("TZ", "").lstrip(":"), _localtime_link(), _etc_timezone()):
        if name and valid_zone(name):
            return name
    offset = datetime.now().astimezone().utcoffset()
    minutes = int(offset.total_seconds() // 60) if offset is not None else 0
    if minutes == 0:
        return "UTC"
    sign = "+" if minutes > 0 else "-"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _localtime_link() -> str:
    try:
        target = os.path.realpath("/etc/localtime")
    except OSError:
        return ""
    marker = "/zoneinfo/"
    return target.split(marker, 1)[1] if marker in target else ""


def _etc_timezone() -> str:
    try:
        with open("/etc/timezone", encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def valid_zone(name: str) -> bool:
    """An IANA zone name or a fixed ``±HH:MM`` offset (what Arrow can read naive times in)."""
    if len(name) == 6 and name[0] in "+-" and name[3] == ":" and name[1:3].isdigit() and name[4:].isdigit():
        return True
    if name.upper() == "UTC":
        return True
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, IsADirectoryError):
        return False
    return True


def check_zone(name: str, key: str = OPTION) -> str:
    """`name` if it is a zone, else ValueError naming `key` (a config or flag error)."""
    if not valid_zone(name):
        raise ValueError(f"{key}: {name!r} is not a time zone (an IANA name such as Europe/Berlin, UTC, or +01:00)")
    return name
