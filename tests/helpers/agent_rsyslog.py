"""rsyslog as the agent's benchmark peer: `imfile` → `omfwd` TCP → a second rsyslog writing a file.

Two real ``rsyslogd -n`` processes with their own config, pid file and work directory on a loopback
port: the *shipper* tails files with ``imfile`` (inotify mode) and forwards each line over TCP; the
*receiver* (``imtcp``) writes every message, one per line, to an output file. The shipper is what
compares with the ranklog agent; the receiver plays the archive.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.net import free_port, wait_for_port
from tests.helpers.procs import spawn, stop

RSYSLOGD = shutil.which("rsyslogd") or "/usr/sbin/rsyslogd"

_RECEIVER = """
global(workDirectory="{work}" maxMessageSize="64k")
module(load="imtcp")
template(name="line" type="string" string="%msg%\\n")
ruleset(name="store") {{
  action(type="omfile" file="{output}" template="line" ioBufferSize="1m" flushOnTXEnd="on")
}}
input(type="imtcp" port="{port}" address="127.0.0.1" ruleset="store")
"""

_SHIPPER = """
global(workDirectory="{work}" maxMessageSize="64k")
module(load="imfile" mode="inotify")
ruleset(name="forward" queue.type="LinkedList" queue.size="200000" queue.dequeueBatchSize="1024") {{
  action(type="omfwd" target="127.0.0.1" port="{port}" protocol="tcp" template="RSYSLOG_ForwardFormat")
}}
input(type="imfile" file="{glob}" tag="bench" ruleset="forward" freshStartTail="off")
"""


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (from /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of a process and of its children, living (e.g. the agent's parse workers) and reaped."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    total = sum(int(fields[i]) for i in (11, 12, 13, 14)) / os.sysconf("SC_CLK_TCK")
    for child in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            listed = child.read_text().split()
        except OSError:
            continue  # the thread ended since the glob (a thread of pyarrow's pool, a sender's)
        for text in listed:
            try:
                total += tree_cpu_seconds(int(text))
            except OSError:
                pass  # it ended meanwhile (its time is then in our reaped children's)
    return total


@dataclass
class RsyslogPair:
    shipper: subprocess.Popen
    receiver: subprocess.Popen
    output: Path
    logs: Path
    _counted: tuple[int, int] = (0, 0)  # (bytes of the output already counted, lines in them)

    def count_lines(self) -> int:
        """Lines in the receiver's output, reading only what was appended since the last count (a
        full re-read of a growing file every look would take a core from rsyslog on a small machine)."""
        offset, lines = self._counted
        try:
            with self.output.open("rb") as handle:
                handle.seek(offset)
                for block in iter(lambda: handle.read(1 << 20), b""):
                    lines += block.count(b"\n")
                    offset += len(block)
        except FileNotFoundError:
            return 0
        self._counted = (offset, lines)
        return lines

    def wait_lines(self, expected: int, timeout: float, interval: float = 0.05) -> tuple[int, float]:
        """Wait until the receiver's output holds `expected` lines, looking every `interval` s; (lines,
        monotonic time seen)."""
        deadline = time.monotonic() + timeout
        lines = 0
        while time.monotonic() < deadline:
            lines = self.count_lines()
            if lines >= expected:
                return lines, time.monotonic()
            for proc in (self.shipper, self.receiver):
                if proc.poll() is not None:
                    raise RuntimeError(f"rsyslogd exited with {proc.returncode}: {self.logs.read_text()[-2000:]}")
            time.sleep(interval)
        return lines, time.monotonic()


@contextmanager
def rsyslog_pair(workdir: Path, watch_glob: str) -> Iterator[RsyslogPair]:
    """Start receiver then shipper (tailing `watch_glob`); stop both on exit."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    procs: list[subprocess.Popen] = []
    output = workdir / "received.log"
    logs = workdir / "rsyslogd.out"
    try:
        for role, template in (("receiver", _RECEIVER), ("shipper", _SHIPPER)):
            work = workdir / f"{role}-work"
            work.mkdir(exist_ok=True)
            conf = workdir / f"{role}.conf"
            conf.write_text(template.format(work=work, output=output, port=port, glob=watch_glob))
            proc = spawn([RSYSLOGD, "-n", "-f", str(conf), "-i", str(workdir / f"{role}.pid")], log_path=logs)
            procs.append(proc)
            if role == "receiver":
                wait_for_port(port, timeout=20, process=proc)
        time.sleep(0.5)  # let imfile set up its inotify watches
        yield RsyslogPair(procs[1], procs[0], output, logs)
    finally:
        for proc in reversed(procs):
            stop(proc)
