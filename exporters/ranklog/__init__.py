"""ranklog: the log system for distributed ML training.

The in-process library (stdlib only) is what training code imports::

    import ranklog
    log = ranklog.get_logger(__name__)     # structured, rank-attributed JSON lines
    ranklog.install()                      # or: make the root logger structured

Everything else (agent, archive, query, triage) lives in subpackages with optional dependencies.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

# Public names of the in-process library, resolved lazily so `import ranklog` stays cheap.
_LOG_API = {
    "get_logger", "configure", "install", "shutdown", "flush", "trace", "current_trace_id", "new_context",
    "ray_runtime_env", "context_env", "SamplingFilter", "JsonFormatter", "RanklogHandler", "LoggingConfig",
}

__all__ = ["__version__", *sorted(_LOG_API)]


def __getattr__(name: str) -> Any:
    if name in _LOG_API:
        from . import log

        return getattr(log, name)
    raise AttributeError(f"module 'ranklog' has no attribute {name!r}")
