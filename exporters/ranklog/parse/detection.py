"""Recognising a log file's format and layout from its path (and, for generic names, its first lines).

Rules, first match wins (they look at the trailing path components only, so a copied Ray ``logs/``
folder or a torchrun ``--log-dir`` tree is recognised wherever it sits):

- ranklog: ``<job>/<host>/rank-<rank>.pid-<pid>.<part:04d>.jsonl`` → ``ranklog`` (``.log`` →
  ``ranklog-text``); job ``nojob`` and rank ``x`` mean unknown.
- torchrun: ``<run_id>_<8 chars>/attempt_<n>/<local_rank>/{stdout,stderr}.log`` → ``torchrun``,
  ``…/<local_rank>/error.json`` → ``torchrun-error``, ``…/attempt_<n>/filtered_{stdout,stderr}.log``
  → ``torchrun`` (local rank from the ``[default0]:`` prefixes); job = run id, attrs attempt/stream.
- Ray: ``worker-<worker_id>-<job_id>-<pid>.{out,err}`` (job and pid from the name; job ``ffffffff`` is
  Ray's nil job), ``python-core-{worker,driver}-<worker_id>_<pid>.log``, ``raylet*.{out,err,log}``,
  ``gcs_server*.{out,err,log}``, ``job-driver-<submission_id>.log``, and any other ``*.log|out|err``
  directly in a ``session_*/logs`` folder → ``ray``.
- verl: ``*.jsonl`` whose name contains ``metric`` or whose first line is ``{"step": N, "data": {…}}``
  → ``verl-jsonl``.
- other ``*.jsonl``/``*.ndjson``: ``ranklog`` when the first line has ``ts``, ``level`` and ``msg``,
  else ``json``.
- other ``*.log``/``*.out``/``*.err``/``*.txt``/``*.stdout``/``*.stderr``: sniffed from the first
  64 KiB: ``torchrun`` when lines carry torchrun's ``--tee`` prefixes (``[default0]:``, a launcher's
  console as a scheduler captured it), ``verl-console`` when a ``step:N - key:val`` line appears,
  ``ray`` for a Ray driver's console (``ray.init``'s "Started a local Ray instance" / "Connected to Ray
  cluster", or worker lines forwarded with a ``(Actor pid=N)`` prefix: the ray parser reads its JSON
  and text lines alike), ``json`` for JSON lines, ``python`` otherwise (the python parser keeps any
  line it does not recognise as plain text).

Everything else (binary files, checkpoints, ``.gz`` archives, ``.json`` configs) → None.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import PurePath
from typing import Any

from .contract import Detected

SNIFF_BYTES = 64 * 1024

_RANKLOG = re.compile(r"^rank-(?P<rank>\d+|x)\.pid-(?P<pid>\d+)\.(?P<part>\d{4,})\.(?P<ext>jsonl|log)$")
_TORCHRUN_RUN = re.compile(r"^(?P<run_id>.+)_(?P<suffix>[A-Za-z0-9_]{8})$")
_ATTEMPT = re.compile(r"^attempt_(?P<attempt>\d+)$")
_RAY_WORKER = re.compile(r"^worker-(?P<worker_id>[0-9a-f]+)-(?P<job_id>[0-9a-f]+)-(?P<pid>\d+)\.(?P<stream>out|err)$")
_RAY_CORE = re.compile(r"^python-core-(?P<kind>worker|driver)-(?P<worker_id>[0-9a-f]+)_(?P<pid>\d+)\.log$")
_RAY_DAEMON = re.compile(r"^(?P<daemon>raylet|gcs_server)(?:\.\d+)?\.(?:out|err|log)$")
_RAY_JOB_DRIVER = re.compile(r"^job-driver-(?P<submission_id>.+)\.log$")
_TEXT_SUFFIXES = (".log", ".out", ".err", ".txt", ".stdout", ".stderr")
_JSONL_SUFFIXES = (".jsonl", ".ndjson")
_VERL_STEP = re.compile(rb"(?m)^(?:\S.*?)?\bstep:\d+ - [\w/@.\-]+:")
_TEE_LINE = re.compile(rb"(?m)^\[[A-Za-z_][\w\-]*?\d+\]:")  # torchrun --tee: "[default0]:…"
_RAY_NIL_JOB = "ffffffff"
_RAY_CONSOLE = re.compile(rb"Started a local Ray instance|Connected to Ray cluster|Connecting to existing Ray cluster"
                          rb"|^(?:\x1b\[\d+m)?\((?:[\w.:\-]+ )?pid=\d+(?:, ip=[0-9A-Fa-f.:]+)?\)", re.MULTILINE)


def detect(path: str) -> Detected | None:
    """See the module docstring. Reads at most SNIFF_BYTES of the file, only for generic names."""
    parts = PurePath(path).parts
    if not parts:
        return None
    name = parts[-1]
    for rule in (_ranklog, _torchrun, _ray):
        found = rule(name, parts)
        if found is not None:
            return found
    lower = name.lower()
    if lower.endswith(_JSONL_SUFFIXES):
        return _sniff_jsonl(path, lower)
    if lower.endswith(_TEXT_SUFFIXES):
        return _sniff_text(path)
    return None


def _ranklog(name: str, parts: tuple[str, ...]) -> Detected | None:
    match = _RANKLOG.match(name)
    if not match:
        return None
    fields: dict[str, Any] = {"pid": int(match["pid"])}
    if match["rank"] != "x":
        fields["rank"] = int(match["rank"])
    if len(parts) >= 2:
        fields["host"] = parts[-2]
    if len(parts) >= 3 and parts[-3] != "nojob":
        fields["job"] = parts[-3]
    return Detected("ranklog" if match["ext"] == "jsonl" else "ranklog-text", fields)


def _torchrun(name: str, parts: tuple[str, ...]) -> Detected | None:
    if name in ("stdout.log", "stderr.log", "error.json") and len(parts) >= 4:
        local_rank, attempt, run = parts[-2], _ATTEMPT.match(parts[-3]), _TORCHRUN_RUN.match(parts[-4])
        if local_rank.isdigit() and attempt and run:
            fields: dict[str, Any] = {"job": run["run_id"], "local_rank": int(local_rank),
                                      "attempt": int(attempt["attempt"])}
            if name == "error.json":
                return Detected("torchrun-error", fields)
            return Detected("torchrun", {**fields, "stream": name.split(".")[0]})
    if name in ("filtered_stdout.log", "filtered_stderr.log") and len(parts) >= 3:
        attempt, run = _ATTEMPT.match(parts[-2]), _TORCHRUN_RUN.match(parts[-3])
        if attempt and run:
            return Detected("torchrun", {"job": run["run_id"], "attempt": int(attempt["attempt"]),
                                         "stream": name[len("filtered_"):].split(".")[0]})
    return None


def _ray(name: str, parts: tuple[str, ...]) -> Detected | None:
    match = _RAY_WORKER.match(name)
    if match:
        fields: dict[str, Any] = {"pid": int(match["pid"]), "worker_id": match["worker_id"],
                                  "stream": "stdout" if match["stream"] == "out" else "stderr"}
        if match["job_id"] != _RAY_NIL_JOB:
            fields["job"] = match["job_id"]
        return Detected("ray", fields)
    match = _RAY_CORE.match(name)
    if match:
        return Detected("ray", {"pid": int(match["pid"]), "worker_id": match["worker_id"],
                                "ray_component": f"core-{match['kind']}"})
    match = _RAY_DAEMON.match(name)
    if match:
        return Detected("ray", {"ray_component": match["daemon"]})
    match = _RAY_JOB_DRIVER.match(name)
    if match:
        return Detected("ray", {"job": match["submission_id"], "ray_component": "job-driver"})
    in_session_logs = len(parts) >= 3 and parts[-2] == "logs" and parts[-3].startswith("session_")
    if in_session_logs and name.lower().endswith((".log", ".out", ".err")):
        return Detected("ray", {"ray_component": name.split(".")[0]})
    return None


def _head(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read(SNIFF_BYTES)
    except OSError:
        return b""


def _first_json_object(head: bytes) -> dict[str, Any] | None:
    for line in head.splitlines()[:-1] if not head.endswith(b"\n") else head.splitlines():
        if line.strip():
            try:
                value = json.loads(line)
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def _sniff_jsonl(path: str, lower: str) -> Detected:
    if "metric" in lower:
        return Detected("verl-jsonl", {})
    first = _first_json_object(_head(path))
    if first is not None and set(first) == {"step", "data"} and isinstance(first["data"], dict):
        return Detected("verl-jsonl", {})
    if first is not None and {"ts", "level", "msg"} <= set(first):
        return Detected("ranklog", {})
    return Detected("json", {})


def _sniff_text(path: str) -> Detected:
    head = _head(path) if os.path.isfile(path) else b""
    if len(_TEE_LINE.findall(head)) >= 2:
        return Detected("torchrun", {"stream": "console"})
    if _VERL_STEP.search(head):
        return Detected("verl-console", {})
    if _RAY_CONSOLE.search(head):
        return Detected("ray", {"ray_component": "driver"})
    first = _first_json_object(head)
    if first is not None:
        return Detected("ranklog" if {"ts", "level", "msg"} <= set(first) else "json", {})
    return Detected("python", {})
