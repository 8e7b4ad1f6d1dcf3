"""Turning queued entries into lines: one JSON object (or one text line) per record.

This runs in the writer thread, never in the caller. An entry is a plain tuple (cheapest to build)
with the positions named below. Field order in a JSON line: ts, level, msg, logger, host, ip, pid,
rank, local_rank, job, role, trace_id, step, seq, sample_rate, exc, then the user's ``extra=``
fields. Fields with no value are left out rather than written as null.

``extra=`` keys that name a field the logger owns (ts, level, msg, logger, host, ip, pid, seq,
exc, sample_rate and the archive's source/source_id/offset/format/attrs) are written as
``extra_<key>`` so they cannot forge it; ``trace_id``, ``step``, ``role``, ``rank``,
``local_rank`` and ``job`` given in ``extra=`` override the process's values (a caller may
know better). Non-finite floats become the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``
(strict JSON has no spelling for them; a NaN loss must still reach the archive).
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from json.encoder import encode_basestring
from typing import Any

from .process_identity import Identity

# Entry positions.
TS, LEVEL, LOGGER, MSG, ARGS, EXC, EXTRA, TRACE, SAMPLE, IDENT = range(10)

LEVEL_NAMES = {10: "DEBUG", 20: "INFO", 30: "WARNING", 40: "ERROR", 50: "CRITICAL"}
_OWNED = frozenset({"ts", "level", "msg", "logger", "host", "ip", "pid", "seq", "exc", "sample_rate",
                    "source", "source_id", "offset", "format", "attrs"})
_OVERRIDABLE = ("rank", "local_rank", "job", "role")


def level_name(levelno: int) -> str:
    name = LEVEL_NAMES.get(levelno)
    if name is None:
        name = next((LEVEL_NAMES[n] for n in (50, 40, 30, 20) if levelno >= n), "DEBUG")
    return name


def _sanitize(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {str(k): _sanitize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_sanitize(v) for v in value]
    return value


def json_value(value: Any) -> str:
    """Strict JSON for any value (unknown objects become their ``str``)."""
    kind = type(value)
    if kind is str:
        return encode_basestring(value)
    if kind is int:
        return str(value)
    if kind is bool or value is None:
        return "true" if value is True else "false" if value is False else "null"
    if kind is float:
        return repr(value) if math.isfinite(value) else encode_basestring(_sanitize(value))
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str, allow_nan=False)
    except ValueError:
        return json.dumps(_sanitize(value), ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, RecursionError):
        return encode_basestring(repr(value))


def message(msg: Any, args: Any) -> str:
    """``msg % args`` like :meth:`logging.LogRecord.getMessage`, never raising."""
    text = msg if type(msg) is str else str(msg)
    if not args:
        return text
    try:
        return text % args
    except Exception as exc:  # a bad format string must not lose the record
        return f"{text} (ranklog: formatting with args {args!r} failed: {exc})"


def _int_or_none(value: Any) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number == value or isinstance(value, str) else None


class TimeFormatter:
    """RFC 3339 UTC with microseconds; the date/second part is cached (records come in bursts)."""

    def __init__(self) -> None:
        self._second = -1
        self._prefix = ""

    def __call__(self, ts_ns: int) -> str:
        second = ts_ns // 1_000_000_000
        if second != self._second:
            self._second = second
            self._prefix = datetime.fromtimestamp(second, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.")
        return f"{self._prefix}{(ts_ns // 1000) % 1_000_000:06d}Z"


class Renderer:
    """Renders entries of one process (its :class:`Identity`) as JSON or text lines."""

    def __init__(self, identity: Identity, fmt: str = "json") -> None:
        self.identity = identity
        self.format = fmt
        self._ts = TimeFormatter()
        self._json_fragments: dict[Identity, str] = {}
        self._names: dict[str, str] = {}
        self._own_fragment = self._json_identity(identity)
        self.render = self.render_json if fmt == "json" else self.render_text  # one line, with its newline

    # Identity fragments are rendered once per identity, not once per record.
    def _json_identity(self, ident: Identity) -> str:
        fragment = self._json_fragments.get(ident)
        if fragment is None:
            parts = [f',"host":{encode_basestring(ident.host)},"ip":{encode_basestring(ident.ip)},"pid":{ident.pid}']
            if ident.rank is not None:
                parts.append(f',"rank":{ident.rank}')
            if ident.local_rank is not None:
                parts.append(f',"local_rank":{ident.local_rank}')
            if ident.job:
                parts.append(f',"job":{encode_basestring(ident.job)}')
            if ident.role:
                parts.append(f',"role":{encode_basestring(ident.role)}')
            fragment = self._json_fragments[ident] = "".join(parts)
        return fragment

    def _effective(self, entry: tuple) -> tuple[Identity, dict[str, Any] | None, Any, Any]:
        """Identity, remaining extra, trace id and step of an entry (extra may override).

        The entry's ``extra`` is the caller's copy, owned by the writer: it is modified in place.
        """
        ident = entry[IDENT] or self.identity
        extra = entry[EXTRA]
        trace_id = entry[TRACE]
        step = None
        if extra:
            if "trace_id" in extra:
                trace_id = extra.pop("trace_id")
            if "step" in extra:
                raw = extra.pop("step")
                step = _int_or_none(raw)
                if step is None and raw is not None:
                    extra["extra_step"] = raw
            changes = {key: extra.pop(key) for key in _OVERRIDABLE if key in extra}
            if changes:
                for key in ("rank", "local_rank"):
                    if key in changes:
                        changes[key] = _int_or_none(changes[key])
                ident = Identity(**{**ident.__dict__, **changes})
        return ident, extra, trace_id, step

    def _logger_json(self, name: str) -> str:
        encoded = self._names.get(name)
        if encoded is None:
            encoded = self._names[name] = encode_basestring(name)
        return encoded

    def render_batch(self, entries: list[tuple], seq: int) -> list[str]:
        """Lines for `entries`, numbered ``seq + 1``, ``seq + 2``, ….

        This loop is the writer thread's hot spot: the common JSON record (a message with arguments
        and perhaps ``extra={"step": n}``) is rendered inline; everything else goes through
        :meth:`render_json` / :meth:`render_text`.
        """
        out: list[str] = []
        append = out.append
        if self.format != "json":
            for entry in entries:
                seq += 1
                append(self.render_text(entry, seq))
            return out
        render_json, ts, names, own, levels = self.render_json, self._ts, self._names, self._own_fragment, LEVEL_NAMES
        for entry in entries:
            seq += 1
            ts_ns, levelno, name, msg, args, exc, extra, trace_id, sample, ident = entry
            if (exc or trace_id is not None or sample is not None or ident is not None or type(msg) is not str
                    or levelno not in levels or (extra and (len(extra) != 1 or type(extra.get("step")) is not int))):
                append(render_json(entry, seq))
                continue
            if args:
                try:
                    msg = msg % args
                except Exception:
                    append(render_json(entry, seq))
                    continue
            if ts_ns // 1_000_000_000 != ts._second:
                ts(ts_ns)  # refresh the cached date-and-second prefix
            logger = names.get(name) or self._logger_json(name)
            step = f',"step":{extra["step"]}' if extra else ""
            append(f'{{"ts":"{ts._prefix}{ts_ns // 1000 % 1_000_000:06d}Z","level":"{levels[levelno]}",'
                   f'"msg":{encode_basestring(msg)},"logger":{logger}{own}{step},"seq":{seq}}}\n')
        return out

    def render_json(self, entry: tuple, seq: int) -> str:
        msg, args, levelno = entry[MSG], entry[ARGS], entry[LEVEL]
        if args:
            try:
                msg = msg % args
            except Exception:
                msg = message(msg, args)
        elif type(msg) is not str:
            msg = message(msg, args)
        head = (f'{{"ts":"{self._ts(entry[TS])}","level":"{LEVEL_NAMES.get(levelno) or level_name(levelno)}",'
                f'"msg":{encode_basestring(msg)},"logger":{self._logger_json(entry[LOGGER])}')
        ident, extra, trace_id, step = self._effective(entry)
        out = [head, self._json_identity(ident)]
        if trace_id is not None:
            out.append(f',"trace_id":{json_value(str(trace_id))}')
        if step is not None:
            out.append(f',"step":{step}')
        out.append(f',"seq":{seq}')
        if entry[SAMPLE] is not None:
            out.append(f',"sample_rate":{json_value(entry[SAMPLE])}')
        if entry[EXC]:
            out.append(f',"exc":{encode_basestring(entry[EXC])}')
        if extra:
            for key, value in extra.items():
                key = str(key)
                if key in _OWNED:
                    key = "extra_" + key
                out.append(f",{encode_basestring(key)}:{json_value(value)}")
        out.append("}\n")
        return "".join(out)

    def render_text(self, entry: tuple, seq: int) -> str:
        """``<ts> <LEVEL> <logger> [rank=… local_rank=… pid=… seq=… job=… trace_id=… step=…] <msg>``."""
        ident, _extra, trace_id, step = self._effective(entry)
        pairs = []
        if ident.rank is not None:
            pairs.append(f"rank={ident.rank}")
        if ident.local_rank is not None:
            pairs.append(f"local_rank={ident.local_rank}")
        pairs.append(f"pid={ident.pid}")
        pairs.append(f"seq={seq}")
        if ident.job:
            pairs.append(f"job={_no_space(ident.job)}")
        if trace_id is not None:
            pairs.append(f"trace_id={_no_space(str(trace_id))}")
        if step is not None:
            pairs.append(f"step={step}")
        line = (f"{self._ts(entry[TS])} {level_name(entry[LEVEL])} {_no_space(entry[LOGGER]) or '-'} "
                f"[{' '.join(pairs)}] {message(entry[MSG], entry[ARGS])}\n")
        if entry[EXC]:
            line += entry[EXC].rstrip("\n") + "\n"
        return line


def _no_space(text: str) -> str:
    return "_".join(text.split()) if text else text
