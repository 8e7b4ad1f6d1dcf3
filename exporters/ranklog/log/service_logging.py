"""The agent's and the archive's own log lines: plain text, or one ranklog JSON record per line.

``log_format: json`` (``RANKLOG_AGENT_LOG_FORMAT=json``, ``--log-format json``) writes every line as
a ranklog record (``ts``, ``level``, ``logger``, ``msg``, ``host``, ``pid``, ``seq``…) on stderr, so
journald → Loki/Vector/Fluent Bit pipelines get structured fields without a parser — and the
ranklog agent itself reads them with its ``ranklog`` format.
"""

from __future__ import annotations

import logging
import sys

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure(level: str, fmt: str = "text") -> None:
    """Route the root logger to stderr in `fmt` at `level` (replacing earlier handlers)."""
    from .handler import JsonFormatter

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # httpx logs every request with its full URL at INFO: a line per request is noise, and some URLs
    # are secrets (a Slack webhook's path is its credential).
    logging.getLogger("httpx").setLevel(logging.WARNING)
