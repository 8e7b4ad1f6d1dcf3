"""Run `ranklog agent` as a real process for tests of any area (dashboards, reliability, demo…).

    with running_agent([archive_url], token_file, tmp_path / "state", sources=[f"{dir}/*.log"]) as agent:
        ...
        agent.wait_for(lambda m: m.value("ranklog_agent_records_shipped_total") >= 100)
        print(agent.metrics_text())

`sources` are ``GLOB[:FORMAT]`` strings, `presets` preset names; `extra_args` are more agent flags
(e.g. ``["--host", "node1", "--ranklog-log-dir", str(d)]``). The handle can kill the agent (``kill()``
sends SIGKILL, ``stop()`` SIGTERM) and ``restart()`` it with the same arguments.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.net import free_port, wait_for_port
from tests.helpers.procs import ranklog_cmd, spawn, stop


def parse_worker_pids(agent_pid: int) -> list[int]:
    """The parse worker processes (``parse_workers`` > 1) of the agent with this pid."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == agent_pid and b"ranklog.agent.parse_worker" in cmdline:
            pids.append(int(entry))
    return pids


class Scrape:
    """One /metrics scrape: sample values by name and labels."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples = [s for family in text_string_to_metric_families(text) for s in family.samples]

    def value(self, metric: str, /, **labels: str) -> float:
        """Sum of the samples of `metric` whose labels include `labels` (0 when none)."""
        return sum(s.value for s in self.samples
                   if s.name == metric and all(s.labels.get(k) == v for k, v in labels.items()))

    def labels(self, metric: str) -> list[dict[str, str]]:
        return [dict(s.labels) for s in self.samples if s.name == metric]


@dataclass
class AgentHandle:
    args: list[str]
    metrics_port: int
    log_path: Path
    proc: subprocess.Popen | None = None
    restarts: int = field(default=0)
    # One client for every scrape: a new httpx client builds an SSL context each time (~25 ms of CPU,
    # measured), which a test polling every 50 ms would take from the agent it measures.
    http: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=10), repr=False)

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def start(self) -> None:
        self.proc = spawn(self.args, log_path=self.log_path)
        try:
            wait_for_port(self.metrics_port, timeout=60, process=self.proc)
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"agent did not start: {exc}\n{self.log()}") from None

    def metrics_text(self, names: Sequence[str] = ()) -> str:
        """The /metrics text; only the families in `names` when given (prometheus-client's ``name[]``
        filter: a cheaper scrape for a tight poll)."""
        return self.http.get(self.metrics_url, params={"name[]": list(names)} if names else None).text

    def scrape(self, names: Sequence[str] = ()) -> Scrape:
        return Scrape(self.metrics_text(names))

    def wait_for(self, condition: Callable[[Scrape], bool], timeout: float = 60, what: str = "condition",
                 interval: float = 0.2, names: Sequence[str] = ()) -> Scrape:
        """Poll /metrics (only `names` when given) every `interval` s until `condition(scrape)` holds;
        raise with the agent's log when it never does."""
        deadline = time.monotonic() + timeout
        scrape = None
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"agent exited with {self.proc.returncode}\n{self.log()}")
            try:
                scrape = self.scrape(names)
            except httpx.HTTPError:
                scrape = None
            if scrape is not None and condition(scrape):
                return scrape
            time.sleep(interval)
        raise TimeoutError(f"agent: {what} not reached in {timeout}s\n{self.log()[-4000:]}")

    def wait_idle(self, timeout: float = 60, settle: float = 0.6) -> Scrape:
        """Wait until every byte of the tracked files is acknowledged (backlog 0, shipped > 0 stable).

        The backlog gauge is refreshed once per poll (0.25 s by default), so a single idle scrape may
        predate a writer's last lines; idle must hold on two scrapes `settle` seconds apart with nothing
        read or shipped in between.
        """
        def idle(s: Scrape) -> bool:
            return s.value("ranklog_agent_backlog_bytes") == 0 and s.value("ranklog_agent_files_tracked") > 0

        def progress(s: Scrape) -> tuple[float, float]:
            return s.value("ranklog_agent_bytes_read_total"), s.value("ranklog_agent_records_shipped_total")

        deadline = time.monotonic() + timeout
        while True:
            first = self.wait_for(idle, max(0.1, deadline - time.monotonic()), "backlog 0")
            time.sleep(settle)
            second = self.wait_for(lambda s: True, max(0.1, deadline - time.monotonic()), "a scrape")
            if idle(second) and progress(second) == progress(first):
                return second
            if time.monotonic() >= deadline:
                raise TimeoutError(f"agent: backlog 0 did not hold for {settle}s in {timeout}s\n{self.log()[-4000:]}")

    def kill(self) -> None:
        """SIGKILL: no shutdown work at all (the crash case)."""
        if self.proc is not None:
            stop(self.proc, signal.SIGKILL)

    def stop(self) -> int | None:
        return stop(self.proc) if self.proc is not None else None

    def restart(self) -> None:
        self.stop()
        self.restarts += 1
        self.start()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


@contextmanager
def running_agent(archive_urls: Sequence[str] | str, token_file: Path | str, state_dir: Path | str,
                  sources: Sequence[str] = (), presets: Sequence[str] = (), metrics_port: int | None = None,
                  extra_args: Sequence[str] = (), log_path: Path | None = None,
                  prefix: Sequence[str] = ()) -> Iterator[AgentHandle]:
    """A `ranklog agent` process (SIGTERM on exit, SIGKILL if it hangs); `prefix` wraps the command
    (e.g. ``setpriv --reuid …`` to run it as another user)."""
    urls = archive_urls if isinstance(archive_urls, str) else ",".join(archive_urls)
    port = metrics_port or free_port()
    state = Path(state_dir)
    state.mkdir(parents=True, exist_ok=True)
    args = ranklog_cmd("agent", "--archive", urls, "--token-file", str(token_file), "--state-dir", str(state),
                       "--metrics-listen", f"127.0.0.1:{port}")
    for source in sources:
        args += ["--source", source]
    for preset in presets:
        args += ["--preset", preset]
    args = [*prefix, *args, *extra_args]
    # Inside the state dir, which the agent never tails, so a broad source glob cannot pick its own log up.
    handle = AgentHandle(args, port, log_path or state / "agent.log")
    handle.start()
    try:
        yield handle
    finally:
        handle.stop()
