"""The truth sidecar: a corpus process records, next to its own logging calls, what it wrote.

Imported first thing by every corpus program (``sidecar.install()`` before the libraries are
imported, so their handlers pick up the recording ``sys.stdout``/``sys.stderr``). Stdlib only: it
runs inside the training processes the real launchers start.

What it records, one JSON line per record in ``$CORPUS_TRUTH_DIR/<host>-<pid>.jsonl``:

- every ``logging`` record any handler emits (``Handler.handle`` is wrapped): the exact text the
  handler wrote to stdout, stderr or its file, the level, the logger, ``record.created`` and, read
  from the handler's formatter configuration (never from the output), whether the layout prints the
  time (and to which precision), the level, the logger name and a rank field;
- ``print`` calls, ``warnings`` shown, tracebacks (``entrypoint`` prints an uncaught exception
  through ``sys.excepthook`` exactly as the interpreter would; ``block("traceback")`` marks a
  caught one the program prints itself), and other libraries' records through ``pending`` (loguru
  and structlog do not use ``logging``);
- any other write to ``sys.stdout``/``sys.stderr`` as one ``line`` record per line.

The process's identity (rank, local rank, node) is written as ``{"identity": …}`` lines whenever
the program learns it (``set_identity``); it belongs to every record of the process.
Nothing here reads the output back: C++ code writing to fd 2 itself bypasses it (see
``tests/corpus/README.md`` for what the truth of such lines is).
"""

from __future__ import annotations

import builtins
import functools
import json
import logging
import os
import re
import socket
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

ENV_DIR = "CORPUS_TRUTH_DIR"
_local = threading.local()
_lock = threading.RLock()
_out: dict[str, Any] = {"pid": None, "file": None, "seq": 0}
_identity: dict[str, Any] = {}
_pending: list[dict[str, Any]] = []


def _write(obj: dict[str, Any]) -> None:
    directory = os.environ.get(ENV_DIR)
    if not directory:
        return
    with _lock:
        if _out["pid"] != os.getpid():  # first write, or a forked child: a file of its own
            os.makedirs(directory, exist_ok=True)
            path = os.path.join(directory, f"{socket.gethostname()}-{os.getpid()}.jsonl")
            _out.update(pid=os.getpid(), file=open(path, "a", buffering=1, encoding="utf-8"), seq=0)  # noqa: SIM115
            if _identity:
                _out["file"].write(json.dumps({"identity": _identity}) + "\n")
        _out["seq"] += 1
        _out["file"].write(json.dumps({"seq": _out["seq"], **obj}) + "\n")


def set_identity(**fields: Any) -> None:
    """The process's rank, local_rank, … (as the program knows them); they apply to all its records."""
    _identity.update({k: v for k, v in fields.items() if v is not None})
    _write({"identity": dict(_identity)})


def _env_identity() -> None:
    fields = {k.lower(): int(os.environ[k]) for k in ("RANK", "LOCAL_RANK", "GROUP_RANK") if k in os.environ}
    if "TORCHELASTIC_RESTART_COUNT" in os.environ:
        fields["attempt"] = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    fields["host"] = socket.gethostname()
    fields["utcoffset"] = time.localtime().tm_gmtoff  # the zone the process prints local times in
    set_identity(**fields)


# -- the current record: what the writes in progress belong to ------------------------------------------
def _stack() -> list[dict[str, Any]]:
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


@contextmanager
def block(kind: str = "log", **facts: Any) -> Iterator[None]:
    """Every write inside belongs to one record of `kind` (log, print, warning, traceback, …)."""
    frame = {"kind": kind, "created": time.time(), **facts, "chunks": []}
    _stack().append(frame)
    try:
        yield
    finally:
        _stack().pop()
        _flush_frame(frame)


def _flush_frame(frame: dict[str, Any]) -> None:
    by_stream: dict[str, list[str]] = {}
    for stream, text in frame.pop("chunks"):
        by_stream.setdefault(stream, []).append(text)
    for stream, texts in by_stream.items():
        text = "".join(texts)
        if text:
            _write({**frame, "stream": stream, "text": text})


def pending(**facts: Any) -> None:
    """The next complete line(s) written outside any record belong to one record with these facts
    (for libraries that do not go through ``logging``: a structlog processor, …)."""
    _pending.append(facts)


class RecordingStream:
    """A text stream that passes every write through and files it under the current record."""

    def __init__(self, inner: Any, name: str) -> None:
        self._inner, self._name, self._partial = inner, name, ""

    def write(self, text: str) -> int:
        written = self._inner.write(text)
        stack = _stack()
        if stack:
            stack[-1]["chunks"].append((self._name, text))
        else:
            self._loose(text)
        return written

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def _loose(self, text: str) -> None:
        """Writes outside any record: one record per complete line (a pending one takes them all)."""
        self._partial += text
        if "\n" not in self._partial:
            return
        complete, _, self._partial = self._partial.rpartition("\n")
        if _pending:
            _write({"kind": "log", **_pending.pop(0), "stream": self._name, "text": complete + "\n"})
            return
        for line in complete.split("\n"):
            _write({"kind": "line", "created": time.time(), "stream": self._name, "text": line + "\n"})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _recording(stream: Any) -> Any:
    """`stream` itself if it records already or is no standard stream; else wrapped. Processes that
    replace ``sys.stdout``/``sys.stderr`` after start-up (Ray's workers reopen fds 1 and 2) or hand a
    handler the raw stream stay recorded."""
    if isinstance(stream, RecordingStream) or stream is None:
        return stream
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return stream
    return RecordingStream(stream, {1: "stdout", 2: "stderr"}[fd]) if fd in (1, 2) else stream


def _ensure_streams() -> None:
    sys.stdout, sys.stderr = _recording(sys.stdout), _recording(sys.stderr)


# -- logging: the facts of a record as its handler's formatter prints it --------------------------------
_FIELD = {
    logging.PercentStyle: r"%\({}\)",
    logging.StrFormatStyle: r"\{{{}[:!}}]",
    logging.StringTemplateStyle: r"\$\{{?{}\b",
}


def _shows(formatter: logging.Formatter, field: str) -> bool:
    style = formatter._style
    pattern = _FIELD.get(type(style), r"%\({}\)").format(field)
    return re.search(pattern, style._fmt or "") is not None


def _precision(datefmt: str | None, with_msecs: bool) -> str:
    if datefmt is None:
        return "ms" if with_msecs else "s"
    if "%f" in datefmt:
        return "us"
    if any(d in datefmt for d in ("%S", "%X", "%T", "%c", "%s")):
        return "s"
    return "min"


def _record_facts(handler: logging.Handler, record: logging.LogRecord) -> dict[str, Any]:
    facts: dict[str, Any] = {"level": record.levelname, "levelno": record.levelno, "logger": record.name,
                             "created": record.created, "msecs": record.msecs, "handler": type(handler).__name__}
    render = getattr(handler, "_log_render", None)
    if render is not None and type(handler).__name__ == "RichHandler":  # rich renders the time and level itself
        fmt = render.time_format if isinstance(render.time_format, str) else None
        facts.update(time_shown=render.show_time, precision=_precision(fmt, False),
                     level_shown=render.show_level, logger_shown=False, rank_shown=False)
        return facts
    formatter = handler.formatter or logging._defaultFormatter
    if type(formatter).__name__ == "TorchLogsFormatter":  # torch's glog style: "%m%d %H:%M:%S" + msecs*1000
        dist = sys.modules.get("torch.distributed")
        facts.update(time_shown=True, precision="ms", level_shown=True, logger_shown=False,
                     rank_shown=bool(dist and dist.is_available() and dist.is_initialized()))
        return facts
    facts.update(time_shown=formatter.usesTime(),
                 precision=_precision(formatter.datefmt, bool(formatter.default_msec_format)),
                 level_shown=_shows(formatter, "levelname"), logger_shown=_shows(formatter, "name"),
                 rank_shown=any(_shows(formatter, f) for f in ("rank", "rankprefix", "global_rank")))
    return facts


def _wrap_handle(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def handle(self: logging.Handler, record: logging.LogRecord) -> Any:
        _ensure_streams()
        if isinstance(self, logging.StreamHandler) and not isinstance(self, logging.FileHandler):
            self.stream = _recording(self.stream)
        with block("log", **_record_facts(self, record)):  # a record the handler drops writes nothing
            return original(self, record)
    return handle


def _wrap_open(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def _open(self: logging.FileHandler) -> Any:
        return RecordingStream(original(self), "file:" + os.path.abspath(self.baseFilename))
    return _open


def _wrap_print(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def print_(*args: Any, **kwargs: Any) -> None:
        _ensure_streams()
        if _stack():  # printed by a handler or a library's renderer: part of that record
            original(*args, **kwargs)
            return
        facts = _pending.pop(0) if _pending else {"kind": "print"}  # structlog's PrintLogger prints
        with block(**{"kind": "log", **facts}):
            original(*args, **kwargs)
    return print_


def _wrap_showwarning(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def showwarning(*args: Any, **kwargs: Any) -> None:
        _ensure_streams()
        with block("warning", level="WARNING", levelno=logging.WARNING):
            original(*args, **kwargs)
    return showwarning


def _wrap_excepthook(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def excepthook(*args: Any) -> None:
        _ensure_streams()
        if _stack():  # inside entrypoint's record already
            original(*args)
            return
        with block("traceback"):
            original(*args)
    return excepthook


def install() -> None:
    """Record this process's output from now on (idempotent)."""
    if isinstance(sys.stderr, RecordingStream):
        return
    sys.stdout = RecordingStream(sys.stdout, "stdout")
    sys.stderr = RecordingStream(sys.stderr, "stderr")  # named by role even when fds are redirected
    logging.Handler.handle = _wrap_handle(logging.Handler.handle)
    logging.FileHandler._open = _wrap_open(logging.FileHandler._open)
    builtins.print = _wrap_print(builtins.print)
    warnings.showwarning = _wrap_showwarning(warnings.showwarning)
    sys.excepthook = _wrap_excepthook(sys.excepthook)
    threading.excepthook = _wrap_excepthook(threading.excepthook)  # "Exception in thread …" + its traceback
    _env_identity()


def entrypoint(main: Callable[[], Any]) -> Callable[[], Any]:
    """Run `main`; an exception that escapes it is printed by ``sys.excepthook`` (whatever the
    libraries made of it, e.g. torch's ``[rankN]:`` prefixes) as one traceback record, and the
    process exits 1, as the interpreter would do."""

    @functools.wraps(main)
    def run() -> Any:
        try:
            return main()
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException:
            hook = sys.excepthook
            with block("traceback", rank_shown=getattr(hook, "__name__", "") == "_distributed_excepthook"):
                hook(*sys.exc_info())
            sys.stderr.flush()
            raise SystemExit(1) from None
    return run


def rank_from_env() -> int:
    return int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0")))
