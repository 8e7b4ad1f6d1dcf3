"""Layout inference on what Python's ``logging`` really writes in the ecosystem's layouts.

Each case configures the real ``logging`` module (and, where the layout is a library's own, that
library's formatter) with one layout, logs a run's worth of records into a buffer — steps, a config
dump, a caught exception with its traceback, messages that look like fields (``loss: 0.5``,
``[rank3] …``), prints of another writer in between — and keeps, from each ``LogRecord`` the handler
emitted, the truth: where its text starts, its time, level, logger and rank. The parser, told nothing
about the layout, must find every record's start, and its time (to the printed precision), level,
logger and rank wherever the layout prints them.
"""

from __future__ import annotations

import io
import logging
import time
from dataclasses import dataclass

import pytest

from ranklog.parse import SourceContext, parse
from ranklog.parse.inference import learned_patterns
from tests.parse.conftest import READ_TIME_NS, feed_chunks, rows

CONFIG = "config:\nmodel:\n  name: tiny-mlp\n  hidden: 16\noptim:\n  lr: 0.01\n  betas: [0.9, 0.95]"


@dataclass
class Truth:
    offset: int
    created: float
    level: str
    logger: str
    rank: int | None


class _Recorder(logging.StreamHandler):
    """A stream handler that notes where each record's text starts in its buffer."""

    def __init__(self, stream: io.StringIO, rank: int) -> None:
        super().__init__(stream)
        self.truth: list[Truth] = []
        self.rank = rank

    def emit(self, record: logging.LogRecord) -> None:
        record.rank = self.rank
        self.truth.append(Truth(len(self.stream.getvalue().encode()), record.created, record.levelname, record.name,
                                self.rank))
        super().emit(record)


def _run(formatter: logging.Formatter, rank: int = 3) -> tuple[bytes, list[Truth]]:
    stream = io.StringIO()
    handler = _Recorder(stream, rank)
    handler.setFormatter(formatter)
    logger = logging.getLogger(f"train.{id(formatter)}")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    other = logging.getLogger("torch.distributed.elastic")
    other.handlers[:] = [handler]
    other.setLevel(logging.INFO)
    other.propagate = False
    prints: list[int] = []

    def echo(text: str) -> None:  # another writer of the same stream: a print
        prints.append(len(stream.getvalue().encode()))
        stream.write(text + "\n")

    logger.info("rank %d/4 started (pid 4242)", rank)
    logger.info(CONFIG)
    echo("[startup] world size 4")
    for step in range(1, 13):
        logger.info("step %d loss %.4f", step, 1 / step)
        if step % 4 == 0:
            logger.warning("loss: %.3f is above the target", 1 / step)
            other.info("[rank%d] rendezvous round %d done", rank + 1, step)
        if step == 6:
            try:
                raise ConnectionResetError(104, "Connection reset by peer")
            except ConnectionResetError:
                logger.exception("checkpoint upload failed; retrying (1/3)")
            logger.debug("retry 1/3 succeeded")
            echo("epoch 1: done")
    logger.error("finished with errors")
    return stream.getvalue().encode(), handler.truth


def _fmt(fmt: str, datefmt: str | None = None) -> logging.Formatter:
    formatter = logging.Formatter(fmt, datefmt)
    formatter.converter = time.gmtime  # read back in UTC, whatever this machine's zone
    return formatter


def _torch_glog() -> logging.Formatter:
    torch_logging = pytest.importorskip("torch._logging._internal", reason="torch's own glog formatter makes the lines: needs torch (the torch extra)")
    formatter = torch_logging.TorchLogsFormatter()
    formatter.converter = time.gmtime
    return formatter


LAYOUTS = {  # the layouts' precision of the time: 1 (s), 1e3 (ms), 1e6 (us)
    "basicConfig": (lambda: _fmt(logging.BASIC_FORMAT), None),
    "dash": (lambda: _fmt("%(asctime)s - %(name)s - %(levelname)s - %(message)s"), 1e3),
    "examples (accelerate, transformers)": (
        lambda: _fmt("%(asctime)s - %(levelname)s - %(name)s - %(message)s", "%m/%d/%Y %H:%M:%S"), 1),
    "bracketed with rank": (lambda: _fmt("[%(asctime)s] [%(levelname)s] [rank%(rank)s] %(name)s: %(message)s"), 1e3),
    "time of day, padded level": (lambda: _fmt("%(asctime)s %(levelname)-8s %(name)s %(message)s", "%H:%M:%S"), 1),
    "legacy": (lambda: _fmt("%(asctime)s %(levelname)s %(name)s: %(message)s"), 1e3),
    "hydra": (lambda: _fmt("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"), 1e3),
    "transformers explicit": (
        lambda: _fmt("[%(levelname)s|%(filename)s:%(lineno)s] %(asctime)s >> %(message)s"), 1e3),
    "deepspeed": (lambda: _fmt("[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s] %(message)s"), 1e3),
    "ray python": (lambda: _fmt("%(asctime)s\t%(levelname)s %(filename)s:%(lineno)s -- %(message)s"), 1e3),
    "vllm (year-less)": (
        lambda: _fmt("%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s", "%m-%d %H:%M:%S"), 1),
    "iso with zone": (lambda: _fmt("%(asctime)s %(levelname)s %(name)s %(message)s", "%Y-%m-%dT%H:%M:%S%z"), 1),
    "rank=k": (lambda: _fmt("%(asctime)s rank=%(rank)s %(levelname)s %(message)s"), 1e3),
    "torch glog": (_torch_glog, 1e3),
}
SHOWS = {  # what each layout prints besides time and level
    "basicConfig": {"logger"}, "dash": {"logger"}, "examples (accelerate, transformers)": {"logger"},
    "bracketed with rank": {"logger", "rank"}, "time of day, padded level": {"logger"}, "legacy": {"logger"},
    "hydra": {"logger"}, "iso with zone": {"logger"}, "rank=k": {"rank"},
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_every_record_read_right_without_being_told_the_layout(name):
    make, precision = LAYOUTS[name]
    data, truth = _run(make())
    ctx = SourceContext("/logs/train.log", "sid", "python", "node1", "10.0.0.1", options={"timezone": "UTC"},
                        mtime_ns=int((truth[-1].created + 60) * 1e9))
    result = parse(data, 0, ctx, final=True, read_time_ns=READ_TIME_NS)
    got = {row["offset"]: row for row in rows(result.batch)}
    assert all(t.offset in got for t in truth), (name, learned_patterns(ctx), [t.offset for t in truth if t.offset not in got])
    starts = sorted(got)
    for t in truth:  # the record ends where the next one (a record or a print) starts
        row = got[t.offset]
        assert row["level"] == t.level.replace("WARN", "WARNING").replace("WARNINGING", "WARNING"), (name, row)
        if precision is not None:
            assert row["ts"] == int(t.created * precision) * int(1e9 / precision), (name, row["msg"], row["attrs"])
        if "logger" in SHOWS.get(name, ()):
            assert row["logger"] == t.logger, (name, row)
        if "rank" in SHOWS.get(name, ()):
            assert row["rank"] == t.rank, (name, row)
        else:
            assert row["rank"] is None, (name, row)  # a "[rank4]" in a message is no field
    assert len(starts) == len(truth) + 2, (name, [r["msg"][:40] for r in rows(result.batch)])  # + the two prints
    config = got[truth[1].offset]
    assert config["msg"].endswith("betas: [0.9, 0.95]")  # the dump is one record
    caught = next(got[t.offset] for t in truth if t.level == "ERROR" and "upload" in got[t.offset]["msg"])
    assert caught["exc"].endswith("ConnectionResetError: [Errno 104] Connection reset by peer")


@pytest.mark.parametrize("name", ["dash", "torch glog", "vllm (year-less)", "time of day, padded level"])
def test_chunked_reads_learn_the_same(name):
    """Fed in the agent's small pieces (the first ones hold a line or two), the records are those of
    one read: what early pieces could not yet tell, later ones do not change."""
    make, _ = LAYOUTS[name]
    data, truth = _run(make())
    mtime = int((truth[-1].created + 60) * 1e9)
    whole_ctx = SourceContext("/l", "s", "python", "h", "i", options={"timezone": "UTC"}, mtime_ns=mtime)
    whole = parse(data, 0, whole_ctx, final=True, read_time_ns=READ_TIME_NS).batch
    chunk_ctx = SourceContext("/l", "s", "python", "h", "i", options={"timezone": "UTC"}, mtime_ns=mtime)
    chunked, _ = feed_chunks(data, chunk_ctx, [200, 300, 1000, 4000])
    assert rows(chunked) == rows(whole)
    assert chunk_ctx.state == whole_ctx.state


def test_a_new_files_first_lines_wait_for_eight_or_the_end():
    make, _ = LAYOUTS["time of day, padded level"]
    data, _ = _run(make())
    lines = data.split(b"\n")
    ctx = SourceContext("/l", "s", "python", "h", "i", options={"timezone": "UTC"})
    head = b"\n".join(lines[:2]) + b"\n"
    assert parse(head, 0, ctx, final=False, read_time_ns=READ_TIME_NS).consumed == 0  # one or two lines: wait
    assert parse(head, 0, ctx, final=True, read_time_ns=READ_TIME_NS).batch.num_rows == 2  # gone quiet: read
    more = SourceContext("/l", "s", "python", "h", "i", options={"timezone": "UTC"})
    assert parse(data[:2000], 0, more, final=False, read_time_ns=READ_TIME_NS).consumed > 0  # eight and more


def test_a_bracket_the_message_closes_holds_no_fields():
    """``[Rank 2 Error Snippet]:`` (Ray Train's controller) is a message: its rank and level words sit
    in a bracket only the message closes. ``[Rank 2] ERROR …`` and a time in the bracket are headers."""
    from ranklog.parse.inference.tokens import scan

    assert scan("[Rank 2 Error Snippet]:").tokens == []
    assert [kind for _, kind, _ in scan("[Rank 2] ERROR boom").tokens] == ["rank", "level"]
    assert [kind for _, kind, _ in scan("[2026-12-07 14:19:57,325 E 26143 26280] core_worker.cc:2465: x").tokens] \
        == ["time", "level", "num", "num", "code"]
