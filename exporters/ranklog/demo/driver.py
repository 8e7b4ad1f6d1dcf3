"""The whole pipeline on one machine: archive, agents, a failing 16-rank job on 4 nodes, triage.

What runs (all real processes, all stopped at the end by their pid / process group):

- one ``ranklog archive`` on a free loopback port, writing Parquet under ``<workdir>/archive``;
- one ``ranklog agent`` per node (``--host node<i>``): one agent per node, as in production, rather
  than one agent overriding the host per source; each watches its node's log directory only;
- four node processes, each in its own UTS namespace named ``node<i>`` (``unshare --uts``; as
  non-root ``--user --map-root-user`` is added), each launching four ranks that train a numpy model
  with a file-based allreduce. Node 0 logs with ``ranklog.get_logger``, node 1 with ``print``
  captured by ``ranklog run`` (mixed with get_logger), node 2 in a torchrun ``--log-dir`` layout,
  node 3 as Ray workers printing verl console metrics. Rank 5 dies of a CUDA OOM at step 12; the
  others time out in the next allreduce and print NCCL watchdog timeouts.

Then the driver waits until the agents have shipped every byte and the archive has flushed every
acknowledged record to Parquet, prints the triage verdict, two queries and the integrity check,
writes the HTML report and stops everything. The work directory is kept (logs, archive, report)
and its path printed, so the run can be inspected afterwards.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..process_group import signal_group, stop_group

NODES = 4
RANKS_PER_NODE = 4
LAYOUTS = ("ranklog", "run", "torchrun", "ray")
# One id for every layer: Ray names worker files by a hex job id and the ranklog logger takes
# RAY_JOB_ID, so a real verl job has one id everywhere; the demo's torchrun node uses it as run id.
JOB = "02000000"
_SAMPLE = re.compile(r"^([a-zA-Z_:][\w:]*)(?:\{[^}]*\})?\s+(\S+)")


@dataclass
class DemoOptions:
    workdir: Path | None = None
    report: Path | None = None
    steps: int = 20
    fail_rank: int = 5
    fail_step: int = 12
    collective_timeout: float = 3.0
    step_time: float = 0.1
    deadline: float = 120.0  # a safety net against a stuck job or agent, not a performance bound


@dataclass
class Processes:
    """Everything the demo started, stopped in reverse order (SIGTERM to the group, then SIGKILL)."""

    started: list[tuple[str, subprocess.Popen]] = field(default_factory=list)
    logs: list = field(default_factory=list)

    def spawn(self, name: str, args: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
        handle = open(log, "ab")  # noqa: SIM115 - closed in stop_all
        self.logs.append(handle)
        proc = subprocess.Popen(args, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, **(env or {})})
        self.started.append((name, proc))
        return proc

    def stop(self, proc: subprocess.Popen, timeout: float = 15.0) -> int | None:
        return stop_group(proc, timeout=timeout)

    def stop_many(self, procs: list[subprocess.Popen]) -> None:
        """SIGTERM them all at once, then wait for each (they shut down in parallel)."""
        for proc in procs:
            signal_group(proc)
        for proc in procs:
            self.stop(proc)

    def stop_all(self) -> None:
        for _, proc in reversed(self.started):
            self.stop(proc)
        for handle in self.logs:
            handle.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(check: Callable[[], bool], timeout: float, what: str, proc: subprocess.Popen | None = None,
               log: Path | None = None) -> None:
    from ..errors import UserError

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text(errors="replace")[-1500:] if log and log.exists() else ""
            raise UserError(f"{what}: the process exited with {proc.returncode}\n{tail}")
        if check():
            return
        time.sleep(0.1)
    tail = log.read_text(errors="replace")[-1500:] if log and log.exists() else ""
    raise UserError(f"timed out after {timeout:.0f}s waiting for {what}\n{tail}")


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.3):
            return True
    except OSError:
        return False


def scrape(url: str) -> dict[str, float]:
    """Prometheus text → {metric name: sum over label sets}; {} when unreachable."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            text = response.read().decode()
    except OSError:
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match and not line.startswith("#"):
            try:
                out[match.group(1)] = out.get(match.group(1), 0.0) + float(match.group(2))
            except ValueError:
                continue
    return out


def namespace_prefix() -> tuple[list[str], str | None]:
    """The command prefix that gives a node its own host name, or a note why there is none."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return [], "unshare (util-linux) not found: all nodes share this machine's host name"
    prefix = [unshare, "--uts"] if os.geteuid() == 0 else [unshare, "--user", "--map-root-user", "--uts"]
    probe = subprocess.run([*prefix, "true"], capture_output=True)
    if probe.returncode != 0:
        return [], "cannot create a UTS namespace here: all nodes share this machine's host name"
    return prefix, None


def agent_sources(layout: str, node_dir: Path) -> list[str]:
    if layout in ("ranklog", "run"):
        return ["--preset", "ranklog", "--ranklog-log-dir", str(node_dir / "ranklog")]
    if layout == "torchrun":
        return ["--preset", "torchrun", "--torchrun-log-dirs", str(node_dir / "torchrun")]
    return ["--preset", "ray", "--ray-root", str(node_dir / "ray")]


def log_bytes(node_dir: Path) -> int:
    """Bytes of the log files the node's agent watches (its state directory is not among them)."""
    return sum(p.stat().st_size for sub in ("ranklog", "torchrun", "ray") for p in (node_dir / sub).rglob("*")
               if p.is_file())


def parquet_rows(root: Path) -> int:
    import pyarrow.parquet as pq

    total = 0
    for path in root.glob("date=*/hour=*/*.parquet"):
        if not path.name.startswith((".", "_")):
            try:
                total += pq.ParquetFile(path).metadata.num_rows
            except OSError:
                continue  # being replaced by compaction right now; the next poll sees the new file
    return total


def run_demo(options: DemoOptions) -> int:
    """Run the demo; 0 when the verdict names the failing rank."""
    from ..triage.present import make_console

    console = make_console()
    began = time.monotonic()
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="ranklog-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    logs = workdir / "logs"
    logs.mkdir(exist_ok=True)
    token = workdir / "token"
    token.write_text(secrets.token_hex(16) + "\n")
    token.chmod(0o600)
    archive_root = workdir / "archive"
    procs = Processes()
    py = [sys.executable, "-m", "ranklog"]
    try:
        console.rule(f"ranklog demo — {NODES} nodes × {RANKS_PER_NODE} ranks, work directory {workdir}")
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        archive = procs.spawn("archive", [*py, "archive", "--root", str(archive_root), "--listen", f"127.0.0.1:{port}",
                                          "--token-file", str(token), "--state-dir", str(workdir / "archive-state"),
                                          "--flush-interval", "0.5"], logs / "archive.log")
        agents = []
        for node, layout in enumerate(LAYOUTS):
            node_dir = workdir / f"node{node}"
            node_dir.mkdir(exist_ok=True)
            metrics_port = free_port()
            agent = procs.spawn(f"agent node{node}", [
                *py, "agent", "--archive", url, "--token-file", str(token), "--state-dir", str(node_dir / "agent-state"),
                "--metrics-listen", f"127.0.0.1:{metrics_port}", "--host", f"node{node}", "--ip", f"10.0.0.{11 + node}",
                "--poll-interval", "0.1", "--batch-latency", "0.1", "--idle-final", "0.3", "--backoff-max", "0.5",
                *agent_sources(layout, node_dir)], logs / f"agent-node{node}.log")
            agents.append((node, layout, node_dir, metrics_port, agent))
        # The job starts right away: files are the buffer, the agents catch up as they come up.
        prefix, note = namespace_prefix()
        if note:
            console.print(f"[yellow]note:[/] {note}")
        collective = workdir / "collective"
        nodes = []
        for node, layout, node_dir, _, _ in agents:
            args = [*prefix, sys.executable, "-m", "ranklog.demo.node", "--node", str(node),
                    "--ranks-per-node", str(RANKS_PER_NODE), "--world", str(NODES * RANKS_PER_NODE), "--layout", layout,
                    "--log-root", str(node_dir), "--job", JOB, "--collective-dir", str(collective),
                    "--steps", str(options.steps), "--fail-rank", str(options.fail_rank),
                    "--fail-step", str(options.fail_step), "--timeout", str(options.collective_timeout),
                    "--step-time", str(options.step_time)]
            nodes.append(procs.spawn(f"node{node}", args, logs / f"node{node}.log"))
        console.print(f"job {JOB!r} started: node0 get_logger, node1 print under `ranklog run`, node2 torchrun "
                      f"layout, node3 Ray workers with verl console metrics; rank {options.fail_rank} will hit a "
                      f"CUDA OOM at step {options.fail_step}")
        wait_until(lambda: listening(port), 30, "the archive to listen", archive, logs / "archive.log")
        for node, _, _, metrics_port, agent in agents:
            wait_until(lambda p=metrics_port: listening(p), 30, f"the agent of node{node}", agent,
                       logs / f"agent-node{node}.log")
        console.print(f"archive on {url} (root {archive_root}); {NODES} agents running  "
                      f"[dim]{time.monotonic() - began:.1f}s[/]")
        deadline = began + options.deadline
        for node, proc in enumerate(nodes):
            wait_until(lambda p=proc: p.poll() is not None, max(1.0, deadline - time.monotonic()), f"node{node} to finish")
            console.print("  " + (logs / f"node{node}.log").read_text(errors="replace").strip().splitlines()[-1])
        console.print(f"job finished  [dim]{time.monotonic() - began:.1f}s[/]")

        expected = {node: log_bytes(node_dir) for node, _, node_dir, _, _ in agents}

        def shipped() -> bool:
            for node, _, _, metrics_port, _ in agents:
                m = scrape(f"http://127.0.0.1:{metrics_port}/metrics")
                if (m.get("ranklog_agent_bytes_read_total", 0) < expected[node]
                        or m.get("ranklog_agent_backlog_bytes", 1) != 0):
                    return False
            return True

        wait_until(shipped, max(1.0, deadline - time.monotonic()), "the agents to ship every byte")
        shipped_total = sum(scrape(f"http://127.0.0.1:{p}/metrics").get("ranklog_agent_records_shipped_total", 0)
                            for _, _, _, p, _ in agents)
        procs.stop_many([agent for *_, agent in agents])

        def durable() -> bool:
            ingested = scrape(f"{url}/metrics").get("ranklog_archive_ingested_records_total", -1)
            return ingested >= 0 and parquet_rows(archive_root) >= ingested > 0

        wait_until(durable, 20, "the archive to flush every acknowledged record to Parquet", archive,
                   logs / "archive.log")
        console.print(f"agents shipped {shipped_total:,.0f} records; the archive holds {parquet_rows(archive_root):,} "
                      f"in Parquet  [dim]{time.monotonic() - began:.1f}s[/]")
        return _after_the_job(console, options, workdir, archive_root, began)
    finally:
        procs.stop_all()


def _after_the_job(console, options: DemoOptions, workdir: Path, archive_root: Path, began: float) -> int:
    from .. import cli
    from ..query.sources import ArchiveSource
    from ..report import write_report
    from ..triage.analyze import analyze
    from ..triage.gather import TriageData
    from ..triage.present import render

    console.rule("ranklog triage")
    data = TriageData.from_source(ArchiveSource.open(str(archive_root)))
    result = analyze(data, JOB)
    render(result, console)
    steps = [
        ("the failing rank's errors",
         ["query", "--archive", str(archive_root), "--rank", str(options.fail_rank), "--level", "ERROR",
          "--columns", "ts,host,rank,level,msg", "--limit", "5"]),
        ("structured records of rank 0 (ranklog logger, extra fields in attrs)",
         ["query", "--archive", str(archive_root), "--rank", "0", "--contains", "step 1", "--limit", "3",
          "--columns", "ts,host,rank,step,msg,attrs"]),
        ("records that mention the NCCL watchdog timeout",
         ["query", "--archive", str(archive_root), "--contains", "Watchdog caught collective operation timeout",
          "--count"]),
        ("integrity check (sequence and offset gaps, parse errors)", ["integrity", "--archive", str(archive_root)]),
    ]
    for title, argv in steps:
        console.rule(f"ranklog {' '.join(argv[:1])}: {title}")
        console.print(f"[dim]$ ranklog {' '.join(argv)}[/]")
        sys.stdout.flush()
        code = cli.main(argv)
        sys.stdout.flush()
        if code != 0:
            console.print(f"[yellow]exit status {code}[/]")
    report = options.report or (workdir / "report.html")
    write_report(data, result, report)
    console.rule("done")
    named = options.fail_rank in result.verdict.ranks
    console.print(f"HTML report: {report}")
    console.print(f"verdict: {result.verdict.summary} — "
                  + (f"[green]names rank {options.fail_rank}, as planted[/]" if named else "[red]WRONG RANK[/]"))
    console.print(f"work directory kept: {workdir}   total {time.monotonic() - began:.1f}s")
    return 0 if named else 1
