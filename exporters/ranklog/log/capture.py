"""Turning a captured output stream (a child's stdout or stderr) into records.

Used by ``ranklog run``. One :class:`StreamCapture` per stream; it receives raw bytes and emits
:class:`Captured` records. The policy, decided here once:

* **Lines.** A record per line. Bytes are decoded as UTF-8 with invalid sequences replaced
  (U+FFFD): binary garbage becomes a readable record, never an error. A carriage return keeps only
  what follows it (what a terminal shows: the last state of a tqdm bar). ANSI colour codes are
  removed from the record (the console copy keeps them). Empty lines carry nothing and make no
  record. A line longer than ``max_line_bytes`` (1 MiB by default) is cut there and the record gets
  ``truncated`` = the full length in bytes; memory stays bounded whatever the child prints.
* **Levels.** A recognisable prefix sets the level: Python logging's ``ERROR:name:msg``,
  ``[WARNING]``, `` - ERROR - `` (the common ``%(asctime)s - %(name)s - %(levelname)s`` format),
  loguru's ``| ERROR |``, ``<timestamp> ERROR``, a leading ``ERROR``/``WARNING …`` word and glog's
  ``E1202 13:04:05``; Ray's ``(pid=…)`` and torch's ``[rank0]:`` line prefixes are looked through.
  Otherwise stdout lines are INFO and stderr lines WARNING (stderr is the error stream; Python's
  logging writes to stderr by default, which is why its prefixes are checked first and its INFO
  stays INFO).
* **Tracebacks.** ``Traceback (most recent call last):`` starts one record that takes the
  indented frame lines, chained exceptions (``During handling of …``, ``The above exception was
  the direct cause …``) and the exception line; its ``msg`` is the exception line (e.g.
  ``RuntimeError: CUDA error: …``), ``exc`` the whole traceback, level ERROR. Unprefixed lines
  right after the exception line (multi-line exception messages such as CUDA's hints) are kept in
  ``exc`` until the stream is idle for ``idle_seconds`` or another record starts. A traceback that
  directly follows a line prefixed ERROR or CRITICAL (``logging.exception`` output) is attached to
  that record as its ``exc`` and keeps its message; after any other line (say the last INFO line
  before a crash) it is a record of its own, so a crash is never filed under INFO.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

MAX_LINE_BYTES = 1 << 20
MAX_TRACEBACK_LINES = 2000
_TAIL_LINES = 50  # unprefixed lines after the exception line that may still belong to it

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_LINE_PREFIX = re.compile(r"^(?:\((?:[\w.:-]+ )?pid=\d+(?:, ip=[\w.:-]+)?\)\s?|\[(?:rank|default)\d+\]:\s?)+")
_WORD = r"(?P<level>DEBUG|INFO|NOTICE|WARNING|WARN|ERROR|CRITICAL|FATAL|TRACE)"
_LEVEL_PATTERNS = (
    re.compile(rf"^{_WORD}:"),
    re.compile(rf"^{_WORD}\s"),
    re.compile(rf"^.{{0,80}}?\[{_WORD}\s*\]"),
    re.compile(rf"^.{{0,120}}? - {_WORD} - "),
    re.compile(rf"^.{{0,80}}?\| {_WORD}\s*\|"),
    re.compile(rf"^\[?\d{{4}}-\d\d-\d\d[ T][\d:.,]+(?:Z|[+-]\d\d:?\d\d)?\]?\s+{_WORD}\b"),
)
_GLOG = re.compile(r"^(?P<level>[IWEF])\d{4} \d\d:\d\d:\d\d")
_GLOG_LEVELS = {"I": 20, "W": 30, "E": 40, "F": 50}
_LEVELNOS = {"DEBUG": 10, "TRACE": 10, "INFO": 20, "NOTICE": 20, "WARNING": 30, "WARN": 30,
             "ERROR": 40, "CRITICAL": 50, "FATAL": 50}
TRACEBACK_START = "Traceback (most recent call last):"
_CHAIN_MARKERS = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)


def detect_level(line: str) -> int | None:
    """The level a line announces through a known prefix, or None."""
    match = _GLOG.match(line)
    if match:
        return _GLOG_LEVELS[match.group("level")]
    for pattern in _LEVEL_PATTERNS:
        match = pattern.match(line)
        if match:
            return _LEVELNOS[match.group("level")]
    return None


def clean_line(raw: bytes) -> str:
    """Decoded, without line ending, carriage-return history, ANSI codes or Ray/torch prefixes."""
    text = raw.decode("utf-8", "replace").rstrip("\r\n")
    if "\r" in text:
        text = text.rsplit("\r", 1)[-1] or text.rstrip("\r").rsplit("\r", 1)[-1]
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    return _LINE_PREFIX.sub("", text, count=1)


@dataclass
class Captured:
    """One record made from captured output."""

    ts_ns: int
    levelno: int
    msg: str
    exc: str | None = None
    truncated: int | None = None


class StreamCapture:
    """Line splitting, level detection and traceback grouping for one stream."""

    def __init__(self, default_level: int, max_line_bytes: int = MAX_LINE_BYTES, idle_seconds: float = 0.1) -> None:
        self.default_level = default_level
        self.max_line_bytes = max_line_bytes
        self.idle_seconds = idle_seconds
        self._buffer = bytearray()
        self._overflow = 0  # bytes of the current line beyond max_line_bytes (discarded)
        self._line_started = 0
        self._pending: Captured | None = None
        self._pending_prefixed = False
        self._tb: list[str] | None = None
        self._tb_owner: Captured | None = None
        self._tb_phase = ""
        self._tb_blank = 0
        self._tb_tail = 0
        self._tb_ts = 0
        self._tb_final = ""
        self.last_data = time.monotonic()
        self._out: list[Captured] = []

    # ---- input -------------------------------------------------------------------------------
    def feed(self, data: bytes) -> list[Captured]:
        """Take a chunk of output; returns the records it completed."""
        now_ns = time.time_ns()
        self.last_data = time.monotonic()
        start = 0
        while start < len(data):
            newline = data.find(b"\n", start)
            end = len(data) if newline < 0 else newline
            if not self._buffer and not self._overflow:
                self._line_started = now_ns
            room = self.max_line_bytes - len(self._buffer)
            piece = data[start:end]
            if len(piece) > room:
                self._buffer += piece[:room]
                self._overflow += len(piece) - room
            else:
                self._buffer += piece
            if newline < 0:
                break
            self._line(bytes(self._buffer), self._overflow, self._line_started)
            self._buffer.clear()
            self._overflow = 0
            start = newline + 1
        return self._take()

    def idle(self, now: float | None = None) -> list[Captured]:
        """Emit what waits for a following line once the stream has been quiet long enough."""
        if (now or time.monotonic()) - self.last_data >= self.idle_seconds:
            self._finish_traceback()
            self._flush_pending()
        return self._take()

    def close(self) -> list[Captured]:
        """End of stream: a last unterminated line and everything pending."""
        if self._buffer or self._overflow:
            self._line(bytes(self._buffer), self._overflow, self._line_started)
            self._buffer.clear()
            self._overflow = 0
        self._finish_traceback()
        self._flush_pending()
        return self._take()

    def _take(self) -> list[Captured]:
        out, self._out = self._out, []
        return out

    # ---- grouping ----------------------------------------------------------------------------
    def _line(self, raw: bytes, overflow: int, ts_ns: int) -> None:
        text = clean_line(raw)
        if self._tb is not None and self._continue_traceback(text):
            return
        if not text.strip():
            return
        if text.startswith(TRACEBACK_START):
            pending = self._pending
            owner = pending if pending is not None and self._pending_prefixed and pending.levelno >= 40 else None
            if owner is None:
                self._flush_pending()
            else:
                self._pending = None
            self._tb, self._tb_owner, self._tb_phase, self._tb_ts = [text], owner, "body", ts_ns
            self._tb_final = ""
            return
        self._flush_pending()
        level = detect_level(text)
        self._pending = Captured(ts_ns, level or self.default_level, text,
                                 truncated=len(raw) + overflow if overflow else None)
        self._pending_prefixed = level is not None

    def _continue_traceback(self, text: str) -> bool:
        """True when `text` belongs to the traceback being collected."""
        tb = self._tb
        assert tb is not None
        if len(tb) >= MAX_TRACEBACK_LINES:
            self._finish_traceback()
            return False
        if self._tb_phase == "body":
            if text[:1] in (" ", "\t") or not text.strip():
                tb.append(text)
            elif text in _CHAIN_MARKERS:
                tb.append(text)
                self._tb_phase = "chain"
            else:
                tb.append(text)
                self._tb_phase, self._tb_blank, self._tb_tail, self._tb_final = "final", 0, 0, text
            return True
        if self._tb_phase == "chain":
            if not text.strip():
                tb.append(text)
                return True
            if text.startswith(TRACEBACK_START):
                tb.append(text)
                self._tb_phase = "body"
                return True
            self._finish_traceback()
            return False
        # After the exception line.
        if not text.strip():
            self._tb_blank += 1
            return True
        if text in _CHAIN_MARKERS:
            tb.extend([""] * self._tb_blank)
            tb.append(text)
            self._tb_phase, self._tb_blank = "chain", 0
            return True
        if text.startswith(TRACEBACK_START) or detect_level(text) is not None or self._tb_tail >= _TAIL_LINES:
            self._finish_traceback()
            return False
        tb.extend([""] * self._tb_blank)
        tb.append(text)
        self._tb_blank = 0
        self._tb_tail += 1
        return True

    def _finish_traceback(self) -> None:
        tb = self._tb
        if tb is None:
            return
        exc = "\n".join(tb).rstrip("\n")
        exception_line = self._tb_final or tb[-1].strip() or TRACEBACK_START
        owner = self._tb_owner
        if owner is not None:
            owner.exc = exc
            self._out.append(owner)
        else:
            self._out.append(Captured(self._tb_ts, 40, exception_line, exc))
        self._tb, self._tb_owner, self._tb_phase, self._tb_final = None, None, "", ""

    def _flush_pending(self) -> None:
        if self._pending is not None:
            self._out.append(self._pending)
            self._pending = None
