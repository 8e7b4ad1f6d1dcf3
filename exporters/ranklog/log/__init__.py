"""ranklog's in-process logging library (stdlib only: it runs inside users' training environments).

Two lines in a training script::

    import ranklog
    log = ranklog.get_logger(__name__)
    log.info("step done", extra={"step": step, "loss": loss})

or ``ranklog.install()`` to make the root logger (and so every third-party logger) structured.
Records are JSON lines in ``<log_dir>/<job>/<host>/rank-<rank>.pid-<pid>.<part>.jsonl`` written
by a background thread. Modules: :mod:`.log_config` (the ``logging:`` block and ``RANKLOG_*``
variables), :mod:`.process_identity` (rank/job precedence), :mod:`.context` (trace ids),
:mod:`.writer` (queue, queue-full policy, fork), :mod:`.files` (naming, rotation, retention),
:mod:`.render` (the line format), :mod:`.sampling`, :mod:`.handler`, :mod:`.install`,
:mod:`.termination` (flush on SIGTERM) and :mod:`.capture` (stdout/stderr → records, for
``ranklog run``).
"""

from __future__ import annotations

from .context import context_env, current_trace_id, new_context, ray_runtime_env, trace
from .handler import JsonFormatter, RanklogHandler
from .install import install
from .log_config import LoggingConfig
from .logger import RanklogLogger, configure, flush, get_logger, shutdown
from .sampling import SamplingFilter

__all__ = [
    "JsonFormatter", "LoggingConfig", "RanklogHandler", "RanklogLogger", "SamplingFilter", "configure",
    "context_env", "current_trace_id", "flush", "get_logger", "install", "new_context", "ray_runtime_env",
    "shutdown", "trace",
]
