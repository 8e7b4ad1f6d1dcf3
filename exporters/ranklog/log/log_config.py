"""The ``logging:`` block: what the in-process library writes, where, and how much it keeps.

Sources, weakest first: the dataclass defaults < the ``logging:`` block (a dict or a YAML file) <
``RANKLOG_*`` environment variables < keyword arguments to :func:`ranklog.configure`. The
environment beats the file so that a launcher (``ranklog run``, a cluster profile) can redirect
logs without touching code; explicit arguments in code are the most specific and win.

Environment variables: ``RANKLOG_ENABLED``, ``RANKLOG_LEVEL``, ``RANKLOG_FORMAT``,
``RANKLOG_LOG_DIR``, ``RANKLOG_ROTATION``, ``RANKLOG_RETENTION``, ``RANKLOG_JOB`` (the job is read
by :mod:`ranklog.log.process_identity`), ``RANKLOG_QUEUE_SIZE``, ``RANKLOG_FLUSH_INTERVAL``,
``RANKLOG_CONSOLE`` (the stderr echo: :mod:`ranklog.log.console`), ``RANKLOG_FLIGHT_RECORDER``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ..config_loader import load_config
from ..errors import ConfigError
from ..record import normalize_level

LEVEL_NAMES = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
NODE_LOG_DIR = "/var/log/ranklog"  # made by the ranklog_agent role and the node image


def default_log_dir() -> str:
    """Where ranklog files go when nothing says otherwise, and where the agent's ``ranklog`` preset reads:
    :data:`NODE_LOG_DIR` on a node prepared for ranklog (it exists there), else ``ranklog`` in the temp
    directory (``$TMPDIR``, else ``/tmp``), which every user may write, as Ray's ``/tmp/ray``.
    ``$RANKLOG_LOG_DIR`` (and the ``log_dir`` key) choose another place for both sides."""
    if os.path.isdir(NODE_LOG_DIR):
        return NODE_LOG_DIR
    return os.path.join(tempfile.gettempdir(), "ranklog")


DEFAULT_LOG_DIR_HELP = (f"root of <job>/<host>/rank-R.pid-P.NNNN.jsonl (default: $RANKLOG_LOG_DIR, else {NODE_LOG_DIR} "
                        "where it exists, else $TMPDIR/ranklog or /tmp/ranklog: where the agent's ranklog preset reads)")


def _console_level(value: object) -> str:
    """`off` (also false/none/no) or a level name: how much the logger echoes to stderr."""
    if isinstance(value, bool) or str(value).strip().lower() in ("off", "none", "no", "false", "0"):
        return "OFF" if value is not True else "WARNING"
    return _level_name(value)


def _level_name(value: object) -> str:
    """`warn`, `Error`, 40 → the canonical level name (anything else is reported by validate)."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    name = normalize_level(value)
    return name if name in LEVEL_NAMES else str(value)


@dataclass
class LoggingConfig:
    """Settings of the in-process logger (the ``logging:`` YAML block)."""

    enabled: bool = field(default=True, metadata={"help": "write ranklog files at all; when false, "
                                                           "get_logger() loggers behave like plain stdlib loggers"})
    level: str = field(default="INFO", metadata={"choices": LEVEL_NAMES, "parse": _level_name,
                                                 "help": "lowest level written"})
    format: str = field(default="json", metadata={"choices": ("json", "text"), "help": "json lines or text lines"})
    log_dir: str = field(default_factory=default_log_dir, metadata={"help": DEFAULT_LOG_DIR_HELP, "show_default": False})
    rotation: int = field(default=1_000_000_000, metadata={"unit": "size", "help": "start a new part past this size"})
    retention: float = field(default=7 * 86400.0, metadata={"unit": "duration",
                                                            "help": "delete parts older than this (0 keeps all)"})
    job: str | None = field(default=None, metadata={"help": "job id (default: from the launcher's environment)"})
    console: str = field(default="WARNING", metadata={
        "parse": _console_level, "help": "also echo records from this level on to stderr, as stdlib's default "
                                         "console does (DEBUG … CRITICAL, or off)"})
    queue_size: int = field(default=65536, metadata={"help": "records below WARNING beyond this are dropped"})
    flush_interval: float = field(default=0.2, metadata={"unit": "duration",
                                                         "help": "longest time a record waits before it is written"})
    flight_recorder: bool = field(default=False, metadata={
        "help": "record torch collectives (TORCH_FR_BUFFER_SIZE) and dump them beside the rank's logs when it dies "
                "or gets SIGTERM (ranklog.log.flight_recorder)"})

    def validate(self) -> None:
        if self.level not in LEVEL_NAMES:
            raise ValueError(f"level: {self.level!r} is not one of {', '.join(LEVEL_NAMES)}")
        if self.console not in (*LEVEL_NAMES, "OFF"):
            raise ValueError(f"console: {self.console!r} is not off or one of {', '.join(LEVEL_NAMES)}")
        if self.rotation < 4096:
            raise ValueError(f"rotation: {self.rotation} bytes is too small (at least 4096)")
        if self.retention < 0:
            raise ValueError("retention: must not be negative")
        if self.queue_size < 16:
            raise ValueError("queue_size: must be at least 16")
        if not 0 < self.flush_interval <= 60:
            raise ValueError("flush_interval: must be in (0, 60] seconds")

    @property
    def levelno(self) -> int:
        return (LEVEL_NAMES.index(self.level) + 1) * 10

    @property
    def console_levelno(self) -> int:
        """The lowest level echoed to stderr (100: none)."""
        return 100 if self.console == "OFF" else (LEVEL_NAMES.index(self.console) + 1) * 10


_ENV_KEYS = {
    "enabled": "RANKLOG_ENABLED", "level": "RANKLOG_LEVEL", "format": "RANKLOG_FORMAT", "log_dir": "RANKLOG_LOG_DIR",
    "rotation": "RANKLOG_ROTATION", "retention": "RANKLOG_RETENTION", "job": "RANKLOG_JOB",
    "queue_size": "RANKLOG_QUEUE_SIZE", "flush_interval": "RANKLOG_FLUSH_INTERVAL", "console": "RANKLOG_CONSOLE",
    "flight_recorder": "RANKLOG_FLIGHT_RECORDER",
}


def env_overrides(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The config keys set through ``RANKLOG_*`` variables (empty values are ignored)."""
    env = os.environ if env is None else env
    return {key: env[name] for key, name in _ENV_KEYS.items() if env.get(name, "").strip()}


def _block(source: LoggingConfig | Mapping[str, Any] | str | os.PathLike[str] | None) -> dict[str, Any]:
    if source is None:
        return {}
    if isinstance(source, LoggingConfig):
        return {f.name: getattr(source, f.name) for f in fields(LoggingConfig)}
    if isinstance(source, Mapping):
        inner = source.get("logging") if set(source) == {"logging"} else source
        if not isinstance(inner, Mapping):
            raise ConfigError("logging: must be a mapping of keys")
        return dict(inner)
    from ..config_loader import read_yaml

    return read_yaml(source, section="logging")


def resolve(source: LoggingConfig | Mapping[str, Any] | str | os.PathLike[str] | None = None,
            env: Mapping[str, str] | None = None, **overrides: Any) -> LoggingConfig:
    """The effective config: defaults < `source` (block, dict or YAML path) < env < `overrides`."""
    data = _block(source)
    data.update(env_overrides(env))
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return load_config(LoggingConfig, overrides=data)
    except ConfigError as exc:
        raise ConfigError(f"logging.{exc}") from None
