"""Where a running agent's time goes: py-spy samples of every thread (and parse worker), by stage.

    with recording(pid, out_path, rate=200, native=True):
        ...  # the load
    print(format_breakdown(breakdown(out_path)))

py-spy (PyPI ``py-spy``) samples the process from outside — no instrumentation in the agent — with
``--threads --idle --subprocesses`` so idle threads are sampled too, and ``--native`` so that a thread
waiting for the GIL shows CPython's ``take_gil`` on its stack. Each sample is put in one stage by the
frames on its stack (first rule that matches, see :data:`STAGES`), and in one thread role (main
loop, metrics thread, sender, parse worker, …). A stage's share is samples / (rate × seconds): the
number of threads' worth of time it took, so 1.0 is one thread busy (or waiting) all the time.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# (stage, substrings of a frame that put a sample there), first match wins: the GIL and the ACK wait
# before idleness (a sender blocked on the archive's answer is waiting for the ACK, not idle), idleness
# before the stages (a metrics thread blocked on its queue is idle, whatever module it sits in)
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("GIL wait", ("take_gil",)),
    ("HTTP: waiting for the ACK", ("_receive_event (httpcore", "_receive_response_headers (httpcore",
                                   "read (httpcore/_backends")),
    ("idle: waiting for work", ("wait (threading.py", "get (queue.py", "_wait_for_event", "select (selectors.py",
                                "serve_forever", "accept (socket.py", "_read_exactly (", "sleep",
                                "DirectoryWatch.wait (")),
    ("parse", ("ranklog/parse/",)),
    ("encode (Arrow IPC + lz4)", ("encode (", "encode_message (", "assemble (", "body (ranklog/agent/ship.py")),
    ("HTTP: request", ("httpx/", "httpcore/", "h11/")),
    ("metrics from batches", ("ranklog/agent/log_metrics.py",)),
    ("worker IPC (pipes, pickle)", ("parse_pool.py", "parse_worker.py")),
    ("reading files", ("read_step (", "ranklog/agent/file_tracker.py", "ranklog/agent/discover.py")),
    ("checkpoints", ("ranklog/agent/checkpoint.py",)),
)
# thread role by thread name (py-spy --threads prints it), parse workers by their command line
ROLES: tuple[tuple[str, str], ...] = (
    ("parse worker", "ranklog.agent.parse_worker"),
    ("main loop", "MainThread"),
    ("metrics thread", "ranklog-observe"),
    ("senders", "ranklog-sender-"),
    ("pool pipes", "ranklog-parse-"),
)
# a thread whose deepest Python frame is one of these loops is blocked in C (SimpleQueue.get, a pipe read)
_IDLE_LEAVES = ("._send_loop (", "._receive_loop (", "Shipper._run (", "ObserverThread._run (", "serve (")


@dataclass
class Recording:
    path: Path
    rate: int
    seconds: float = 0.0


@contextmanager
def recording(pid: int, out: Path, rate: int = 200, native: bool = True, gil: bool = False) -> Iterator[Recording]:
    """py-spy samples `pid` (and its children) into `out` (raw collapsed stacks) while the block runs.

    With `gil`, only the thread holding the GIL is sampled (py-spy ``--gil``): the samples over
    rate × seconds are the share of time the GIL was held at all."""
    cmd = [str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(pid), "--rate", str(rate), "--format",
           "raw", "--output", str(out), "--threads", "--subprocesses"]
    cmd += ["--gil"] if gil else ["--idle"]
    cmd += ["--native"] if native else ["--nonblocking"]  # native stacks need the process paused per sample
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)  # attached
    result = Recording(out, rate)
    started = time.monotonic()
    try:
        yield result
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        result.seconds = time.monotonic() - started
        if not out.exists():
            raise RuntimeError(f"py-spy wrote no profile: {err.decode(errors='replace')[-2000:]}")


def _classify(frames: str, rules) -> str:
    for name, needles in rules:
        if any(needle in frames for needle in needles):
            return name
    return "other"


def breakdown(raw: Path) -> dict[str, Counter]:
    """{role: Counter(stage → samples)} from a raw py-spy profile."""
    out: dict[str, Counter] = {}
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        header = ""
        while frames and frames[0].startswith("process "):  # a child's samples sit under its parent's
            header = frames.pop(0)
        thread = frames.pop(0) if frames and frames[0].startswith("thread (") else ""
        who = header if "parse_worker" in header else thread.partition("): ")[2]
        role = next((name for name, needle in ROLES if needle in who), "other")
        if frames and any(leaf in frames[-1] for leaf in _IDLE_LEAVES):
            stage = "idle: waiting for work"
        else:
            stage = _classify(";".join(frames), STAGES)
        out.setdefault(role, Counter())[stage] += int(count)
    return out


def format_breakdown(parts: dict[str, Counter], rate: int, seconds: float) -> str:
    """A table: stage rows, role columns, threads' worth of time (samples / (rate × seconds))."""
    roles = [name for name, _ in ROLES if name in parts] + (["other"] if "other" in parts else [])
    stages = [name for name, _ in STAGES] + ["other"]
    scale = rate * seconds
    header = f"{'stage':<32}" + "".join(f"{role:>15}" for role in roles) + f"{'all':>9}"
    lines = [header, "─" * len(header)]
    for stage in stages:
        values = [parts[role][stage] / scale for role in roles]
        if sum(values) < 0.005:
            continue
        lines.append(f"{stage:<32}" + "".join(f"{v:>15.2f}" for v in values) + f"{sum(values):>9.2f}")
    return "\n".join(lines)
