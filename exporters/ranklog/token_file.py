"""A token file other users can read is a token they hold: say so (a warning and a metric).

The agent and the archive read bearer tokens from files (``token_file``); one left world-readable
(``0644``, what ``echo $TOKEN > tokens`` gives under the usual umask) lets any account on the node
write or read logs as this node. The file is still used — refusing it would take logging down on a
deployment detail — but each time it is (re)read with permissions for "other" users, a WARNING names
it and the mode to set (``chmod 600``), and ``ranklog_token_file_insecure`` is 1 until it is fixed
(the alert ``RanklogTokenFileInsecure`` watches it).
"""

from __future__ import annotations

import logging
import os
import stat

log = logging.getLogger("ranklog.token_file")


def exposure(mode: int) -> str | None:
    """How a token file's mode exposes it to other users, or None."""
    others = []
    if mode & stat.S_IROTH:
        others.append("readable")
    if mode & stat.S_IWOTH:
        others.append("writable")
    if not others:
        return None
    return f"{' and '.join(others)} by every user (mode {stat.S_IMODE(mode):04o})"


def check(path: str, mode: int, gauge=None) -> bool:
    """Warn and set `gauge` when the token file's `mode` exposes it; True when it does."""
    found = exposure(mode)
    if gauge is not None:
        gauge.set(1 if found else 0)
    if found:
        log.warning("token file %s is %s: any account on this machine can use its tokens; run `chmod 600 %s` "
                    "(counted in ranklog_token_file_insecure)", path, found, path)
    return found is not None


def check_path(path: str, gauge=None) -> bool:
    try:
        return check(path, os.stat(path).st_mode, gauge)
    except OSError:
        return False
