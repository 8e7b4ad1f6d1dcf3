"""PyTorch Flight Recorder dumps beside a rank's logs (opt-in: ``flight_recorder: true`` in the ``logging:``
block, ``RANKLOG_FLIGHT_RECORDER=1``, or :func:`enable`).

With ``TORCH_FR_BUFFER_SIZE`` set, torch keeps a ring buffer of each rank's recent collectives — the
process group, the collective's sequence number (``collective_seq_id``), its name
(``gloo:all_reduce``), sizes and times — for NCCL and gloo alike. NCCL's watchdog dumps it by itself
on a timeout; with gloo (and for deaths the watchdog never sees) nothing does. Enabled, this module
dumps it (``torch._C._distributed_c10d._dump_fr_trace_json``) when the rank dies of an uncaught
exception (a collective timeout raises one in the rank that waited), and when the launcher stops it
with SIGTERM (torchrun stops the healthy ranks that way when one failed, and the hung rank too). The
hung rank's dump is what names it: its buffer ends one collective before its peers'.

A dump is one line in ``<log_dir>/<job>/<host>/flight-recorder.rank-<rank>.pid-<pid>.jsonl``: a
ranklog record (``logger`` ``ranklog.flight_recorder``, ``msg`` says why, the rank's identity) whose
``flight_recorder`` field holds torch's dump as it came. The agent's ``ranklog`` preset ships it with
the rank's other files, ``--log_dir`` reads it, triage uses it (``ranklog.triage.flight_recorder``).
:func:`dump` is there for code that catches a collective's exception itself.

Stdlib only: torch is used only if the process already imported it. ``enable`` sets
``TORCH_FR_BUFFER_SIZE`` (default :data:`BUFFER_SIZE` entries) when unset, which torch reads when the
first process group is created: enable before ``init_process_group`` (or set the variable in the
launcher's environment).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from . import termination
from .files import directory
from .process_identity import detect
from .render import TimeFormatter

BUFFER_ENV = "TORCH_FR_BUFFER_SIZE"
BUFFER_SIZE = 2000
LOGGER = "ranklog.flight_recorder"
FILE_PREFIX = "flight-recorder."
_state: dict[str, Any] = {"log_dir": None, "job": None, "hooked": False}
_lock = threading.Lock()


def enable(log_dir: str | os.PathLike[str], job: str | None = None, buffer_size: int = BUFFER_SIZE) -> None:
    """Record collectives (``TORCH_FR_BUFFER_SIZE``, unless set) and dump them on death and SIGTERM."""
    os.environ.setdefault(BUFFER_ENV, str(buffer_size))
    with _lock:
        _state["log_dir"], _state["job"] = str(log_dir), job
        if _state["hooked"]:
            return
        _state["hooked"] = True
    _hook_uncaught()
    termination.before_termination(lambda: dump("SIGTERM from the launcher"))


def enabled() -> bool:
    return _state["log_dir"] is not None


def dump(reason: str) -> Path | None:
    """Write the rank's flight recorder buffer now (why: `reason`); the file, or None when there is
    nothing to dump (not enabled, torch not imported, no recorder in this build)."""
    log_dir = _state["log_dir"]
    torch = sys.modules.get("torch")
    if log_dir is None or torch is None:
        return None
    try:
        trace = json.loads(torch._C._distributed_c10d._dump_fr_trace_json(includeCollectives=True, onlyActive=False))
    except Exception:  # no distributed build, or nothing recorded
        return None
    identity = detect(job=_state["job"])
    record = {"ts": TimeFormatter()(time.time_ns()), "level": "WARNING",
              "msg": f"torch flight recorder dump ({reason}): {len(trace.get('entries') or [])} collective(s)",
              "logger": LOGGER, "host": identity.host, "ip": identity.ip, "pid": identity.pid}
    for key in ("rank", "local_rank", "job", "role"):
        value = getattr(identity, key)
        if value is not None:
            record[key] = value
    record["flight_recorder"] = trace
    path = directory(log_dir, identity) / f"{FILE_PREFIX}rank-{identity.path_rank}.pid-{identity.pid}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
    with _lock, open(path, "a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())
    return path


def _hook_uncaught() -> None:
    previous = sys.excepthook

    def hook(exc_type, exc, tb):  # type: ignore[no-untyped-def]
        if not issubclass(exc_type, KeyboardInterrupt):
            _quietly(f"uncaught {exc_type.__name__}")
        previous(exc_type, exc, tb)

    sys.excepthook = hook
    previous_thread = threading.excepthook

    def thread_hook(args):  # type: ignore[no-untyped-def]
        _quietly(f"uncaught {args.exc_type.__name__} in thread {args.thread.name if args.thread else '?'}")
        previous_thread(args)

    threading.excepthook = thread_hook


def _quietly(reason: str) -> None:
    try:
        dump(reason)
    except Exception:
        pass  # a failed dump must not hide the exception the interpreter is about to report
