"""Benchmark: time to verdict — from the failing line written on a node to the verdict at a webhook.

Target (issue 44): p90 ≤ 30 s through Prometheus (its default 15 s scrape and evaluation) and
Alertmanager, with the verdict naming the right rank; the direct push (an agent's suspect straight
to the archive) is the floor, measured in the same runs.

Each run is a real torchrun job on torch's CPU build (gloo; 8 ranks on one node, or 32 ranks as 4
nodes × 8 in UTS namespaces of their own, which needs root) training for a few steps until one rank,
chosen per run, raises ``torch.OutOfMemoryError`` with the CUDA allocator's text (GPU-only, so raised
as a string by the scenario worker); the workers log through a different library's layout each run
(:data:`LAYOUTS`). Its node's logs are read by two agents per node:

- path **alertmanager**: agents with suspects off, scraped by Prometheus (global ``scrape_interval``
  and ``evaluation_interval`` 15 s, the prometheus role's defaults, the generated rules as checked
  in), Alertmanager with the alertmanager role's ``alertmanager.yml`` (rendered by Ansible: the
  verdict route, ``group_wait: 0s``), archive A's ``/v1/alerts``, triage, webhook;
- path **direct push**: agents with suspects on, shipping to archive B, which triages on the suspect.

"Written" is when the failing rank's ``stderr.log`` first holds the OOM text (polled every 10 ms);
"delivered" is when the webhook server receives the incident's first verdict (both on this
machine's clock). A verdict is right when its ranks are exactly the injected rank. Every run gets
fresh archives and agents (Prometheus and Alertmanager stay up, like in production); the per-run
breakdown splits the alert path at the archive: line → alert received (scrape + evaluation +
Alertmanager) and alert → verdict (flush wait, triage, report, delivery).

Usage: ``python tests/benchmarks/bench_verdict_latency.py [--runs 10] [--ranks 8,32]
[--signature-eval-interval 5s]``; ``--quick`` (smoke test: 2 ranks, 1 run, 1 s scrape: the figures
mean nothing).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "exporters"))

from tests.dashboards.live_stack import running_alertmanager, running_prometheus  # noqa: E402
from tests.deploy.conftest import ansible_env, link_collection, render_role_template  # noqa: E402
from tests.helpers.agent_proc import running_agent  # noqa: E402
from tests.helpers.archive_proc import running_archive  # noqa: E402
from tests.helpers.net import free_port  # noqa: E402
from tests.helpers.torchrun_job import running_torchrun  # noqa: E402
from tests.helpers.verdict_receivers import VerdictReceivers, running_receivers  # noqa: E402

TARGET_P90_S = 30.0
RANKS_PER_NODE = 8
OOM_TEXT = "CUDA out of memory"
PATHS = ("alertmanager", "direct push")
# The workers' logging layouts, one per run in turn (tests/corpus/layouts.py: the real libraries).
LAYOUTS = ("legacy", "deepspeed", "transformers", "accelerate", "glog", "loguru", "structlog", "bracketed",
           "rich", "examples")


@dataclass
class Run:
    ranks: int
    index: int
    fault_rank: int
    layout: str
    written: float | None = None
    delivered: dict[str, float] = field(default_factory=dict)
    right: dict[str, bool] = field(default_factory=dict)
    named: dict[str, list[int]] = field(default_factory=dict)
    alert_received: float | None = None
    note: str = ""

    def latency(self, path: str) -> float | None:
        if self.written is None or path not in self.delivered:
            return None
        return self.delivered[path] - self.written


@dataclass
class Stack:
    work: Path
    token_file: Path
    receivers: VerdictReceivers
    archive_ports: dict[str, int]
    agent_ports: list[list[int]]  # per run, the alert path's agents (one per node): all Prometheus targets


def _rules(work: Path, eval_interval: str | None) -> Path:
    """The generated rules (as checked in), or with the failure group's interval replaced ("": none)."""
    out = work / "ranklog.rules.yml"
    args = [sys.executable, "-m", "dashboards.rules", "-o", str(out)]
    if eval_interval is not None:
        args += ["--set", f"signature_eval_interval={eval_interval}"]
    subprocess.run(args, check=True, cwd=REPO, timeout=120)
    return out


@contextlib.contextmanager
def _alertmanager(work: Path, archive_url: str, token: str, receivers: VerdictReceivers):
    """prometheus-alertmanager with the alertmanager role's own alertmanager.yml (rendered by Ansible)."""
    config = work / "am" / "alertmanager.yml"
    config.parent.mkdir(parents=True)
    env = ansible_env(link_collection(work / "collections"))
    render_role_template("alertmanager", "alertmanager.yml.j2", config, {
        "alertmanager_receivers": [{"name": "oncall", "webhook_configs": [{"url": f"{receivers.base}/oncall"}]}],
        "alertmanager_ranklog_verdict_url": f"{archive_url}/v1/alerts",
        "alertmanager_ranklog_verdict_token": token}, env)
    with running_alertmanager(work / "am", config_file=config) as alertmanager:
        yield alertmanager.port


def _archive_config(path: Path, receivers: VerdictReceivers, hook: str) -> Path:
    path.write_text(yaml.safe_dump({"verdict": {"receivers": [
        {"name": "bench", "type": "webhook", "url": f"{receivers.base}/{hook}"}]}}))
    return path


def _wait_for_line(run: Run, job, deadline: float) -> None:
    """`run.written`: when the failing rank's stderr first holds the OOM text (polled every 10 ms)."""
    path = None
    while time.monotonic() < deadline:
        if path is None:
            with contextlib.suppress(StopIteration):
                path = job.rank_dir(run.fault_rank) / "stderr.log"
        if path is not None and path.exists() and OOM_TEXT in path.read_text(errors="replace"):
            run.written = time.time()
            return
        if not job.running and path is None:
            break
        time.sleep(0.01)
    run.note = "the failing line never appeared"


def _verdicts(stack: Stack, run_id: str, since: float) -> dict[str, dict]:
    found: dict[str, dict] = {}
    for hook, path in (("am", "alertmanager"), ("direct", "direct push")):
        for received in stack.receivers.sent(f"/{hook}"):
            doc = received.body
            if received.at >= since and doc.get("kind") == "verdict" and doc.get("training_job") == run_id \
                    and path not in found:
                found[path] = {**doc, "_at": received.at}
    return found


def one_run(stack: Stack, ranks: int, index: int, quick: bool, timeout: float) -> Run:
    nodes = max(1, ranks // RANKS_PER_NODE)
    nproc = ranks // nodes
    run = Run(ranks, index, fault_rank=(3 + 5 * index) % ranks, layout=LAYOUTS[index % len(LAYOUTS)])
    run_id = f"v{ranks}r{index}-{secrets.token_hex(2)}"
    work = stack.work / run_id
    hosts = [f"node{n}" for n in range(nodes)]
    started = time.time()
    with contextlib.ExitStack() as ctx:
        archives = {}
        work.mkdir(parents=True)
        for name, hook in (("am", "am"), ("direct", "direct")):
            config = _archive_config(work / f"{name}.yaml", stack.receivers, hook)
            archives[name] = ctx.enter_context(running_archive(
                work / f"archive-{name}", stack.token_file, port=stack.archive_ports[name],
                extra_args=["--config", str(config), "--archive-id", name]))
        logs = work / "logs"
        for node, host in enumerate(hosts):
            common = ["--preset", "torchrun", "--torchrun-log-dirs", str(logs / host), "--host", host,
                      "--parse-workers", "1"]
            ctx.enter_context(running_agent([archives["am"].url], stack.token_file, work / f"agent-am-{host}",
                                            metrics_port=stack.agent_ports[index][node],
                                            extra_args=[*common, "--no-suspect-push"]))
            ctx.enter_context(running_agent([archives["direct"].url], stack.token_file, work / f"agent-direct-{host}",
                                            extra_args=common))
        steps = ["--steps", "30", "--fault-step", "3" if quick else "6", "--step-seconds", "0.5" if quick else "1.0"]
        job = ctx.enter_context(running_torchrun(logs, run_id, ["--layout", run.layout, "--fault", "cuda_oom",
                                                                "--fault-rank", str(run.fault_rank), *steps],
                                                 nproc=nproc, hosts=hosts))
        deadline = time.monotonic() + timeout
        _wait_for_line(run, job, deadline)
        while run.written is not None and time.monotonic() < deadline:
            found = _verdicts(stack, run_id, started)
            if len(found) == len(PATHS):
                break
            time.sleep(0.2)
        for path, doc in _verdicts(stack, run_id, started).items():
            run.delivered[path] = doc["_at"]
            run.named[path] = doc["ranks"]
            run.right[path] = doc["ranks"] == [run.fault_rank]
            if path == "alertmanager" and run.written is not None:
                # The first alert of this failure to reach the archive (a job-less group may carry
                # alerts of earlier runs that are still firing: they arrived before the line).
                received = [t["received_ns"] / 1e9 for t in doc["triggers"] if t["received_ns"] / 1e9 >= run.written]
                run.alert_received = min(received) if received else None
    shutil.rmtree(work, ignore_errors=True)
    return run


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def report(runs: list[Run], ranks: int, scrape: str, group_interval: str) -> list[str]:
    lines = [f"\n## {ranks} ranks ({max(1, ranks // RANKS_PER_NODE)} node(s)), Prometheus scrape/evaluation {scrape}, "
             f"failure rules every {group_interval}, {len(runs)} runs", "",
             "| path | runs with a verdict | p50 s | p90 s | max s | right rank |", "|---|---|---|---|---|---|"]
    verdicts = []
    for path in PATHS:
        got = [r.latency(path) for r in runs if r.latency(path) is not None]
        right = sum(1 for r in runs if r.right.get(path))
        if got:
            lines.append(f"| {path} | {len(got)}/{len(runs)} | {statistics.median(got):.1f} | {_pct(got, 0.9):.1f} | "
                         f"{max(got):.1f} | {right}/{len(runs)} |")
        else:
            lines.append(f"| {path} | 0/{len(runs)} | - | - | - | {right}/{len(runs)} |")
        verdicts.append((path, got, right))
    split = [(r.alert_received - r.written, r.delivered["alertmanager"] - r.alert_received) for r in runs
             if r.alert_received and r.written and "alertmanager" in r.delivered]
    if split:
        lines += ["", f"alert path split at the archive (medians): line → alert received "
                      f"{statistics.median(s[0] for s in split):.1f} s (scrape + evaluation + Alertmanager), "
                      f"alert → verdict delivered {statistics.median(s[1] for s in split):.1f} s "
                      f"(flush wait, triage, report, delivery)"]
    lines += ["", "per run: " + "; ".join(
        f"#{r.index} {r.layout} rank {r.fault_rank}: " + ", ".join(
            f"{p.split()[0]} {r.latency(p):.1f}s {r.named.get(p)}" if r.latency(p) is not None else f"{p.split()[0]} -"
            for p in PATHS) + (f" ({r.note})" if r.note else "") for r in runs)]
    (am_path, am, am_right), (_, direct, _) = verdicts
    ok = len(am) == len(runs) and am_right == len(runs) and _pct(am, 0.9) <= TARGET_P90_S
    p90 = f"{_pct(am, 0.9):.1f} s" if am else "no verdict"
    floor = f"{_pct(direct, 0.9):.1f} s" if direct else "no verdict"
    lines.append(f"\n{'PASS' if ok else 'FAIL'}: {ranks} ranks, via {am_path}: p90 {p90} (target ≤ "
                 f"{TARGET_P90_S:.0f} s), right rank {am_right}/{len(runs)}; floor (direct push) p90 {floor}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--ranks", default="8,32", help="comma-separated; 8 per node")
    parser.add_argument("--scrape", default="15s", help="Prometheus scrape and evaluation interval")
    parser.add_argument("--signature-eval-interval", default=None,
                        help="replace the failure rules' group interval (default: as generated; '' for none)")
    parser.add_argument("--timeout", type=float, default=420.0, help="per run")
    parser.add_argument("--json", type=Path, help="also write every run here")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.ranks, args.scrape, args.timeout = 1, "2", "1s", 240.0
    if not (shutil.which("prometheus") and shutil.which("prometheus-alertmanager")):
        print("FAIL: prometheus and prometheus-alertmanager are needed (apt-get install prometheus "
              "prometheus-alertmanager)")
        return 1
    sizes = [int(x) for x in args.ranks.split(",")]
    from dashboards.rules import Thresholds

    chosen = Thresholds().signature_eval_interval if args.signature_eval_interval is None else args.signature_eval_interval
    group_interval = chosen or f"none: {args.scrape}"
    work = Path(tempfile.mkdtemp(prefix="ranklog-bench-verdict-"))
    token_file = work / "tokens"
    token_file.write_text(secrets.token_hex(16) + "\n")
    max_nodes = max(max(1, n // RANKS_PER_NODE) for n in sizes)
    lines = ["# time to verdict: failing line written → verdict delivered at a webhook", "",
             f"Prometheus {args.scrape} scrape and evaluation (failure rules' group interval: "
             f"{group_interval}), Alertmanager with the alertmanager role's config "
             f"(group_wait 0s for the verdict route), torchrun CPU/gloo, CUDA OOM injected on one rank per run."]
    all_runs: list[Run] = []
    try:
        with running_receivers() as receivers:
            # Every run's agents have ports (so scrape phases) of their own, like the nodes of a fleet:
            # one fixed target would measure one phase between its scrape and the rules' evaluation.
            stack = Stack(work, token_file, receivers, {"am": free_port(), "direct": free_port()},
                          [[free_port() for _ in range(max_nodes)] for _ in range(args.runs)])
            rules = _rules(work, args.signature_eval_interval)
            archive_am = f"http://127.0.0.1:{stack.archive_ports['am']}"
            with _alertmanager(work, archive_am, token_file.read_text().split()[0], receivers) as am_port, \
                    running_prometheus(work / "prom", rules, [f"127.0.0.1:{p}" for run in stack.agent_ports for p in run],
                                       [f"127.0.0.1:{stack.archive_ports['am']}"], f"127.0.0.1:{am_port}",
                                       interval=args.scrape):
                for ranks in sizes:
                    runs = []
                    for index in range(args.runs):
                        run = one_run(stack, ranks, index, args.quick, args.timeout)
                        runs.append(run)
                        print(f"  {ranks} ranks run {index} ({run.layout}): rank {run.fault_rank}, " + ", ".join(
                            f"{p} {run.latency(p):.1f}s {run.named.get(p)}" if run.latency(p) is not None
                            else f"{p} -" for p in PATHS) + (f" ({run.note})" if run.note else ""), flush=True)
                    all_runs += runs
                    lines += report(runs, ranks, args.scrape, group_interval)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in all_runs], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
