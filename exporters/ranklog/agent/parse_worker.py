"""A parse worker process: raw bytes of tailed files in, Arrow record batches out (``parse_workers`` > 1).

Run as ``python -m ranklog.agent.parse_worker '{"compression": …, "training_metrics": […]}'`` by
:mod:`.parse_pool`, one process per worker, so the per-line work runs on other cores than the agent's
reading and shipping (its Python parts hold the GIL: two parse threads in one process ran no faster
than one). Per piece the worker parses, summarizes the batch for the metrics
(:class:`.log_metrics.BatchSummarizer`) and encodes it as the compressed Arrow IPC message the
request will carry (:func:`.ship.encode_message`); the agent's main process only joins messages.
The summary and the encoding of a piece run in a second thread (:class:`_Answers`) while the next
piece is parsed, as the reading-thread agent overlaps its parse with its metrics and sender threads:
both are mostly Arrow C++ that releases the GIL, so one worker uses more than one core when there is
one to spare (one hot file with 2 workers: 0.85–0.89× the reading-thread agent's lines/s when a
worker did all three in turn, 1.08–1.10× with the overlap; four files, both cores busy either way:
0.98× the old worker's in a same-window A/B). A file always goes to the same worker,
which keeps what must flow from one piece of a file to the next exactly as the reading thread does
when it parses itself: the unconsumed rest of the last read (a traceback still open, a line without
its newline) and the parser state (``ctx.state``: the last measured time, Ray's actor name). So
records are the ones of a single-process parse, byte for byte.

Frames on stdin/stdout, both ways: ``<II`` (header length, payload length), a pickled header dict,
the payload (raw file bytes in; the batch's IPC message out). Requests:
``{"op": "parse", "file", "offset", "final", "path", "mtime_ns", "read_time_ns"[, "ctx", "parse_offset"][, "fields"][, "slot", "size"]}``
(``ctx`` the first time a file comes to this process; ``fields``: the file's layout defaults changed,
:mod:`.node_identity`; ``slot``: the raw bytes are in that slot of the
shared :class:`.piece_arena.PieceArena`, not in the payload) and ``{"op": "forget", "file"}``. Answers:
``{"file", "start", "consumed", "errors", "state", "rows", "summary", "busy"[, "slot"]}`` (in the order the
pieces came; ``busy``: the seconds the piece's parse took — the summary and the encoding overlap the
next parse and are not in it — so 1 s a second means the worker never waited for a piece) or ``{"error": traceback}`` (then
the worker exits: a parser bug stops the agent loudly, as it does without workers; the pieces parsed
before it are answered first). The worker ends
at EOF on stdin — the agent closes it when it stops, and the kernel does when the agent dies — and
ignores SIGTERM/SIGINT, which a service manager or a terminal sends to the whole process group.
"""

from __future__ import annotations

import copy
import json
import os
import pickle
import queue
import signal
import struct
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, BinaryIO

from .piece_arena import PieceArena

_FRAME = struct.Struct("<II")


def write_frame(out: BinaryIO, header: dict[str, Any], payload: bytes | memoryview = b"") -> None:
    head = pickle.dumps(header, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_FRAME.pack(len(head), len(payload)))
    out.write(head)
    if len(payload):
        out.write(payload)
    out.flush()


def _read_exactly(inp: BinaryIO, size: int) -> bytes | None:
    """`size` bytes, or None at EOF first. A buffered reader's read(n) waits for all n and fills a new
    bytes object directly (a zeroed bytearray first cost a page fault and a clear per 4 KiB)."""
    data = inp.read(size) if size else b""
    return data if len(data) == size else None


def read_frame(inp: BinaryIO) -> tuple[dict[str, Any], bytes] | None:
    """The next (header, payload), or None at EOF (a frame cut short counts as EOF)."""
    sizes = _read_exactly(inp, _FRAME.size)
    if sizes is None:
        return None
    head_len, payload_len = _FRAME.unpack(sizes)
    head = _read_exactly(inp, head_len)
    payload = _read_exactly(inp, payload_len)
    if head is None or payload is None:
        return None
    return pickle.loads(head), payload


@dataclass
class _File:
    ctx: Any  # parse.SourceContext
    parse_offset: int
    carry: bytes = b""


_WARM_UP = {"ranklog": b'{"ts":"2026-12-02T12:00:00.000001Z","level":"ERROR","msg":"CUDA out of memory","rank":0}\n',
            "python": b"2026-12-02 12:00:00,000 - t - INFO - step 1\nTraceback (most recent call last):\n  x\nE: y\n"}


def _warm_up(parse, summarizer, schema, compression: str) -> None:
    """Import every format and run each kernel once before the first piece arrives: on a busy node a
    cold worker took seconds over its first piece, long enough for a copytruncate rotation to
    overwrite the copy the agent was still to read from."""
    from .ship import encode_message

    parse.parsers()
    for fmt, data in _WARM_UP.items():
        ctx = parse.SourceContext(source="warm-up", source_id="warm-up", format=fmt, host="h", ip="127.0.0.1")
        batch = parse.parse(data, 0, ctx, final=True, read_time_ns=time.time_ns()).batch
        summarizer.summarize(batch)
        encode_message(batch, schema, compression)


class _Answers:
    """The worker's answers: each parsed piece's metrics summary and IPC message, made and written in a
    thread of its own, in the order the pieces were parsed, while the parse thread goes on with the
    next piece. At most one parsed batch waits for it (``put`` blocks), so a worker holds at most
    three pieces' batches (measured peak RSS per worker after two 2.4 M-line backlogs: 209–223 MiB
    without this thread, 234–242 MiB with it)."""

    def __init__(self, out: BinaryIO, summarizer, schema, compression: str) -> None:
        self._out, self._summarizer, self._schema, self._compression = out, summarizer, schema, compression
        self._queue: queue.Queue = queue.Queue(maxsize=1)
        self._thread = threading.Thread(target=self._run, name="ranklog-parse-answers", daemon=True)
        self._thread.start()

    def put(self, answer: dict[str, Any], batch) -> None:
        """Answer `answer` once `batch` (None: no rows) is summarized and encoded."""
        self._queue.put((answer, batch))

    def close(self) -> None:
        """Write every answer still waiting, then return."""
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        from .ship import encode_message

        try:
            while (item := self._queue.get()) is not None:
                answer, batch = item
                answer["summary"] = self._summarizer.summarize(batch) if batch is not None else None
                body = encode_message(batch, self._schema, self._compression) if batch is not None else b""
                write_frame(self._out, answer, body)
        except BrokenPipeError:
            os._exit(0)  # the agent is gone
        except Exception:
            # the parse thread may be mid-piece: end the process here, after the one frame that says why
            _report(self._out, traceback.format_exc())
            os._exit(1)


def _report(out: BinaryIO, text: str) -> None:
    """The error frame (the agent logs it and replaces this worker) and the same text on stderr."""
    try:
        write_frame(out, {"error": text})
    except OSError:
        pass
    sys.stderr.write(text)
    sys.stderr.flush()


def serve(inp: BinaryIO, out: BinaryIO, compression: str, training_metrics: list[str],
          arena: dict[str, int] | None = None) -> int:
    import pyarrow as pa

    from .. import parse
    from ..record import arrow_schema
    from .log_metrics import BatchSummarizer

    pa.set_cpu_count(1)  # the pool is the parallelism: kernels of one worker stay on its own core
    schema = arrow_schema()
    summarizer = BatchSummarizer(training_metrics)
    _warm_up(parse, summarizer, schema, compression)
    pieces = PieceArena.attach(**arena) if arena else None

    answers = _Answers(out, summarizer, schema, compression)
    try:
        _parse_pieces(inp, answers, parse, pieces)
    finally:
        answers.close()  # the pieces parsed before EOF, or before a parser error, are answered first
    return 0


def _parse_pieces(inp: BinaryIO, answers: _Answers, parse, pieces: PieceArena | None) -> None:
    """Parse the pieces on stdin until EOF, each file's in order with its carried rest and parser state."""
    files: dict[int, _File] = {}
    while True:
        frame = read_frame(inp)
        if frame is None:
            return
        header, payload = frame
        if header["op"] == "forget":
            files.pop(header["file"], None)
            continue
        started = time.perf_counter()
        uid = header["file"]
        if "ctx" in header:
            files[uid] = _File(parse.SourceContext(**header["ctx"]), header["parse_offset"])
        state = files[uid]
        if "fields" in header:  # layout defaults the agent's node-wide identity join lent the file
            state.ctx.fields = header["fields"]
        if state.parse_offset + len(state.carry) != header["offset"]:
            raise RuntimeError(f"file {uid}: bytes from offset {header['offset']} do not follow the "
                               f"{state.parse_offset + len(state.carry)} already held")
        ctx = state.ctx
        ctx.source, ctx.mtime_ns = header["path"], header["mtime_ns"]
        if "slot" in header:
            payload = pieces.view(header["slot"], header["size"])
        buffer = state.carry + payload if state.carry else bytes(payload)
        del payload  # the slot is the agent's again once this piece is answered
        result = parse.parse(buffer, state.parse_offset, ctx, final=header["final"], read_time_ns=header["read_time_ns"])
        consumed = result.consumed
        state.carry = buffer[consumed:] if consumed < len(buffer) else b""
        start = state.parse_offset
        state.parse_offset += consumed
        rows = result.batch.num_rows if consumed and result.batch is not None else 0
        answer = {"file": uid, "start": start, "consumed": consumed, "errors": result.errors,
                  "state": copy.deepcopy(ctx.state),  # the next piece goes on with ctx.state
                  "rows": rows, "busy": time.perf_counter() - started}
        if "slot" in header:
            answer["slot"] = header["slot"]
        answers.put(answer, result.batch if rows else None)


def main(argv: list[str] | None = None) -> int:
    # The agent ends its workers by closing their stdin, after it shipped what they parsed; a stop
    # signal sent to the whole group (systemd, Ctrl-C) must not kill them first.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    inp = os.fdopen(os.dup(0), "rb", buffering=1 << 20)
    out = os.fdopen(os.dup(1), "wb", buffering=1 << 20)
    os.dup2(2, 1)  # anything printed by accident goes to the agent's log, not into the frames
    options = json.loads((argv if argv is not None else sys.argv[1:])[0])
    try:
        return serve(inp, out, options["compression"], options["training_metrics"], options.get("arena"))
    except BrokenPipeError:
        return 0  # the agent is gone
    except Exception:
        _report(out, traceback.format_exc())
        return 1


if __name__ == "__main__":
    sys.exit(main())
