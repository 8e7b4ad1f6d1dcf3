"""Real Prometheus and Alertmanager processes on loopback, and a webhook receiver, for the live test.

Prometheus runs with the generated scrape layout (:func:`dashboards.provisioning.scrape_config`)
and a rule file rendered by the real ``python -m dashboards.rules`` command, so the test exercises
what a deployment runs. Everything is started with :func:`tests.helpers.procs.spawn` and stopped by
pid in teardown.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpx
import yaml

from dashboards.provisioning import scrape_config
from tests.helpers.net import free_port, serving, wait_for_port
from tests.helpers.procs import spawn, stop


def wait_ready(url: str, proc, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: process exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} not ready after {timeout}s")


@dataclass
class Webhook:
    """Alertmanager's webhook receiver: keeps every notification (JSON) it is sent."""

    port: int
    notifications: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/alerts"

    def alerts(self) -> list[dict[str, Any]]:
        with self.lock:
            return [alert for note in self.notifications for alert in note.get("alerts", [])]


@contextmanager
def running_webhook() -> Iterator[Webhook]:
    hook = Webhook(free_port())

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with hook.lock:
                hook.notifications.append(json.loads(body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            return

    with serving(Handler, hook.port, "webhook"):
        yield hook


@dataclass
class Alertmanager:
    port: int
    proc: Any

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def running_alertmanager(workdir: Path, webhook_url: str = "", config_file: Path | None = None) -> Iterator[Alertmanager]:
    """prometheus-alertmanager on loopback with `config_file` (e.g. the alertmanager role's, rendered),
    or one route to `webhook_url`."""
    workdir.mkdir(parents=True, exist_ok=True)
    if config_file is None:
        config_file = workdir / "alertmanager.yml"
        config_file.write_text(yaml.safe_dump({
            "route": {"receiver": "test", "group_by": ["alertname", "instance", "training_job", "rank"],
                      "group_wait": "1s", "group_interval": "1s", "repeat_interval": "1h"},
            "receivers": [{"name": "test", "webhook_configs": [{"url": webhook_url, "send_resolved": False}]}],
        }))
    port = free_port()
    proc = spawn(["prometheus-alertmanager", f"--config.file={config_file}",
                  f"--storage.path={workdir / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
                  "--cluster.listen-address="], log_path=workdir / "alertmanager.log")
    try:
        wait_for_port(port, timeout=30, process=proc)
        wait_ready(f"http://127.0.0.1:{port}/-/ready", proc)
        yield Alertmanager(port, proc)
    finally:
        stop(proc)


@dataclass
class Prometheus:
    port: int
    proc: Any
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def query(self, expr: str) -> dict[str, Any]:
        """The `data` of an instant query; raises with Prometheus' error text when it fails."""
        answer = httpx.post(f"{self.url}/api/v1/query", data={"query": expr}, timeout=10).json()
        if answer.get("status") != "success":
            raise AssertionError(f"{answer.get('errorType')}: {answer.get('error')}")
        return answer["data"]

    def query_range(self, expr: str, seconds: float = 60, step: str = "1s") -> dict[str, Any]:
        end = time.time()
        answer = httpx.post(f"{self.url}/api/v1/query_range", timeout=10,
                            data={"query": expr, "start": end - seconds, "end": end, "step": step}).json()
        if answer.get("status") != "success":
            raise AssertionError(f"{answer.get('errorType')}: {answer.get('error')}")
        return answer["data"]

    def alerts(self) -> list[dict[str, Any]]:
        return httpx.get(f"{self.url}/api/v1/alerts", timeout=10).json()["data"]["alerts"]


@contextmanager
def running_prometheus(workdir: Path, rules_file: Path, agents: list[str], archives: list[str],
                       alertmanager: str, interval: str = "1s") -> Iterator[Prometheus]:
    """Prometheus scraping and evaluating every `interval` (tests: 1s; the time-to-verdict benchmark:
    15s, the Prometheus role's default), alerting to `alertmanager` (host:port)."""
    workdir.mkdir(parents=True, exist_ok=True)
    timeout = {"scrape_timeout": "1s"} if interval == "1s" else {}
    config = {
        "global": {"scrape_interval": interval, **timeout, "evaluation_interval": interval},
        "rule_files": [str(rules_file)],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]},
        **scrape_config(agents, archives, interval=interval),
    }
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log_path = workdir / "prometheus.log"
    proc = spawn(["prometheus", f"--config.file={workdir / 'prometheus.yml'}",
                  f"--storage.tsdb.path={workdir / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                 log_path=log_path)
    try:
        wait_for_port(port, timeout=30, process=proc)
        wait_ready(f"http://127.0.0.1:{port}/-/ready", proc)
        yield Prometheus(port, proc, log_path)
    finally:
        stop(proc)
