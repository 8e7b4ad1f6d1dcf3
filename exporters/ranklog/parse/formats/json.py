"""`json` format: any JSON lines, with a configurable field mapping and sensible defaults.

``options["mapping"]`` maps a JSON key to a record field (``{"message": "msg", "severity": "level"}``);
those keys win over the defaults below. The defaults cover the common shippers and loggers:
Ray's structured logging (``ray.LoggingConfig(encoding="JSON")``: asctime, levelname, message,
job_id, actor_name, timestamp_ns, …), structlog (event, timestamp), python-json-logger
(message, levelname, name), Docker's json-file driver (log, time) and the usual
time/severity/message spellings. Ray's ``actor_name`` becomes ``role``; ``timestamp_ns`` beats
``asctime`` because it carries the full precision and the zone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ranklog.errors import ConfigError
from ranklog.record import FIELDS

from ..json_bulk import parse_json_lines, parse_json_lines_many
from .ranklog import RANKLOG_KEYS

if TYPE_CHECKING:
    from ..contract import ParseResult, SourceContext

DEFAULT_KEYS: dict[str, tuple[str, ...]] = {
    "ts": ("ts", "timestamp_ns", "time", "timestamp", "@timestamp", "asctime", "datetime", "t"),
    "level": ("level", "levelname", "severity", "lvl", "loglevel", "log_level"),
    "msg": ("msg", "message", "event", "text", "log"),
    "exc": ("exc", "exc_text", "exc_info", "exception", "stack_trace", "traceback"),
    "logger": ("logger", "name", "logger_name"),
    "host": ("host", "hostname"),
    "ip": ("ip", "node_ip", "node_ip_address"),
    "pid": ("pid", "process"),
    "rank": ("rank", "world_rank"),  # Ray Train names the global rank world_rank
    "local_rank": ("local_rank",),
    "job": ("job", "job_id"),
    "role": ("role", "actor_name"),
    "trace_id": ("trace_id",),
    "step": ("step", "global_step"),
    "seq": ("seq",),
}
assert set(DEFAULT_KEYS) == set(RANKLOG_KEYS)


def build_mapping(user: Mapping[str, Any] | None) -> dict[str, tuple[str, ...]]:
    """The effective field → keys mapping: the user's keys first, then the defaults."""
    mapping = {name: list(keys) for name, keys in DEFAULT_KEYS.items()}
    for key, target in (user or {}).items():
        if target not in RANKLOG_KEYS:
            known = ", ".join(name for name in FIELDS if name in RANKLOG_KEYS)
            raise ConfigError(f"mapping.{key}: {target!r} is not a record field (one of {known})")
        for keys in mapping.values():
            if key in keys:
                keys.remove(key)
        mapping[target].insert(0, key)
    return {name: tuple(keys) for name, keys in mapping.items()}


def parse_json(data: bytes, base_offset: int, ctx: SourceContext, *, final: bool, read_time_ns: int) -> ParseResult:
    mapping = build_mapping(ctx.options.get("mapping"))
    return parse_json_lines(data, base_offset, ctx, final=final, read_time_ns=read_time_ns, mapping=mapping)


def parse_json_many(items, *, read_time_ns: int) -> list[ParseResult]:
    """Reads of one options (parse.parse_many groups them so): one mapping."""
    mapping = build_mapping(items[0][2].options.get("mapping"))
    return parse_json_lines_many(items, read_time_ns=read_time_ns, mapping=mapping)


PARSERS = {"json": parse_json}
PARSERS_MANY = {"json": parse_json_many}
