"""Presets: the places training stacks write logs to, with no configuration.

Each preset expands to sources with format ``auto``: the parser recognises the format from the
file's name and layout (``ranklog.parse.detect``), the same recognition `query --log_dir` uses, so
the presets also work on copies of these trees elsewhere when their roots are pointed there.

- ``ranklog``: ``$RANKLOG_LOG_DIR``, else the logger's own default (``/var/log/ranklog`` where it exists,
  else ``/tmp/ranklog``: :func:`ranklog.log.log_config.default_log_dir`), ``<job>/<host>/rank-R.pid-P.NNNN.jsonl``
  (or ``.log``) as written by the ranklog library and ``ranklog run``: out of the box they meet.
- ``ray``: every ``.out``/``.err``/``.log`` directly in ``<ray_root>/session_*/logs/``: worker
  ``worker-<id>-<job>-<pid>.{out,err}``, ``python-core-*.log``, ``job-driver-*.log``, ``raylet.*``,
  ``gcs_server.*`` (``session_latest`` is a symlink to one of the sessions and is skipped so no file is
  read twice; the ``events/`` and ``old/`` subfolders are not logs of this session's processes).
- ``torchrun``: ``<log_dir>/<run_id>_*/attempt_<n>/<local_rank>/{stdout,stderr}.log`` and ``error.json``
  under each of ``torchrun_log_dirs``.
- ``verl``: console logs (``*.log``) and metrics JSONL (``*.jsonl``) under each of ``verl_log_dirs``.
"""

from __future__ import annotations

import os
from dataclasses import replace

from ranklog.parse import zones

from .agent_config import AgentConfig, SourceSpec


def _join(root: str, pattern: str) -> str:
    return os.path.join(root.rstrip("/") or "/", pattern)


def preset_sources(name: str, cfg: AgentConfig) -> list[SourceSpec]:
    if name == "ranklog":
        root = cfg.ranklog_log_dir
        return [SourceSpec(_join(root, "**/*.jsonl")), SourceSpec(_join(root, "**/*.log"))]
    if name == "ray":
        logs = _join(cfg.ray_root, "session_*/logs")
        skip = ["*/session_latest/*"]
        return [SourceSpec(_join(logs, pattern), exclude=skip) for pattern in ("*.out", "*.err", "*.log")]
    if name == "torchrun":
        return [SourceSpec(_join(root, f"*/attempt_*/*/{leaf}"))
                for root in cfg.torchrun_log_dirs for leaf in ("stdout.log", "stderr.log", "error.json")]
    if name == "verl":
        return [SourceSpec(_join(root, pattern)) for root in cfg.verl_log_dirs for pattern in ("**/*.jsonl", "**/*.log")]
    raise ValueError(f"unknown preset {name!r}")


def all_sources(cfg: AgentConfig) -> list[SourceSpec]:
    """Explicit sources first (they win when a file matches several), then the presets'; each reads
    times printed without a zone in its own ``timezone`` option, else ``tz``, else this machine's zone."""
    out = list(cfg.sources)
    for name in cfg.preset:
        out += preset_sources(name, cfg)
    zone = cfg.tz or zones.local_zone()
    return [replace(spec, options={zones.OPTION: zone, **spec.options}) for spec in out]
