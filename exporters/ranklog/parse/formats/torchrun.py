"""`torchrun` formats: the per-rank files of a ``--log-dir`` tree and torchelastic's ``error.json``.

``<log_dir>/<run_id>_<suffix>/attempt_<n>/<local_rank>/{stdout,stderr}.log`` hold what the rank
printed (local rank, attempt and job come from the path, see :mod:`.detect`), read like the
:mod:`.python` format (layouts learned per file). Teed output (``--tee``, the launcher's console, ``filtered_*.log``) carries
``[default0]:`` prefixes: role ``default`` and local rank ``0``, one multi-line stream per prefix.
PyTorch's ``[rank3]: `` before each line of a process-group rank's uncaught exception gives the
global rank, in a rank's file or after a tee prefix.

``error.json`` is written once by ``@record`` when a rank dies:
``{"message": {"message": "RuntimeError: …", "extraInfo": {"py_callstack": "Traceback …",
"timestamp": "1796224695"}}}`` → one ERROR record (msg = the message, exc = the call stack, ts = the
timestamp). It is parsed when complete (valid JSON) or at ``final``; a file that never becomes valid
JSON is kept line by line as text records.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ranklog.record import parse_ts, ts_array

from ..batch import build_batch, empty_batch
from ..contract import ParseResult
from ..text_layouts import TextFormat, parse_text_lines, parse_text_lines_many
from .python import PYTHON

if TYPE_CHECKING:
    from ..contract import SourceContext

TORCHRUN = PYTHON  # its prefixes are launcher prefixes (ranklog.parse.inference.prefixes), its layouts learned


def parse_torchrun(data: bytes, base_offset: int, ctx: SourceContext, *, final: bool, read_time_ns: int) -> ParseResult:
    return parse_text_lines(data, base_offset, ctx, final=final, read_time_ns=read_time_ns, fmt=TORCHRUN)


def parse_torchrun_error(data: bytes, base_offset: int, ctx: SourceContext, *, final: bool,
                         read_time_ns: int) -> ParseResult:

    if base_offset != 0 or not data.strip():
        # The file is written in one go; anything appended later is not torchelastic's: keep it as text.
        if not data.strip():
            return ParseResult(empty_batch(), len(data) if final else 0, 0)
        return parse_text_lines(data, base_offset, ctx, final=final, read_time_ns=read_time_ns,
                                fmt=TextFormat(layouts=()))
    try:
        document = json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        if not final:
            return ParseResult(empty_batch(), 0, 0)
        result = parse_text_lines(data, base_offset, ctx, final=True, read_time_ns=read_time_ns,
                                  fmt=TextFormat(layouts=()))
        return ParseResult(result.batch, result.consumed, result.batch.num_rows)
    row = error_record(document)
    columns = {
        "ts": ts_array([row["ts"]]),
        "level": pa.array(["ERROR"]), "msg": pa.array([row["msg"]]), "exc": pa.array([row["exc"]], pa.string()),
        "attrs": pa.array([row["attrs"]], pa.string()),
    }
    return ParseResult(build_batch(ctx, base_offset, [0], columns, read_time_ns), len(data), 0)


def error_record(document: Any) -> dict[str, Any]:
    """msg/exc/ts/attrs of torchelastic's error file (any shape: unknown ones are kept in attrs)."""
    message = document.get("message") if isinstance(document, dict) else None
    extra: dict[str, Any] = {}
    if isinstance(message, dict):
        info = message.get("extraInfo") if isinstance(message.get("extraInfo"), dict) else {}
        msg = str(message.get("message", ""))
        exc = info.get("py_callstack")
        ts = parse_ts(_number_or_text(info.get("timestamp")))
        extra = {k: v for k, v in info.items() if k not in ("py_callstack", "timestamp")}
        if "errorTraits" in message:
            extra["errorTraits"] = message["errorTraits"]
    else:
        msg = str(message if message is not None else json.dumps(document)[:2000])
        exc, ts = None, None
    if not exc and isinstance(document, dict) and isinstance(document.get("message"), str):
        exc = document.get("message")
    return {"msg": msg.strip() or "torchelastic error file", "exc": exc, "ts": ts,
            "attrs": json.dumps({"torchelastic": extra}, default=str) if extra else None}


def _number_or_text(value: Any) -> Any:
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return value


def parse_torchrun_many(reads, *, read_time_ns: int) -> list[ParseResult]:
    return parse_text_lines_many(reads, read_time_ns=read_time_ns, fmt=TORCHRUN)


PARSERS = {"torchrun": parse_torchrun, "torchrun-error": parse_torchrun_error}
PARSERS_MANY = {"torchrun": parse_torchrun_many}
