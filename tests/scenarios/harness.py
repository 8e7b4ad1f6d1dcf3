"""Load a scenario's ground truth and judge ``ranklog triage`` on its real-tool output, on two paths.

A scenario is a folder ``tests/scenarios/<name>/`` with ``truth.json`` and ``out/`` (the tool's output
as it came out, one folder per node: ``out/<host>/…``). The two paths a user has:

- raw: ``ranklog triage --log_dir out/ --json``;
- archive: a real ``ranklog archive`` and one real ``ranklog agent`` per node folder (``--host <host>``,
  the node's files as its sources, as on the node itself) → ``ranklog triage --archive ROOT --json``.

:func:`judge` says for each of status, rank, node, category, step and the decisive line whether the
verdict agrees with the truth. Used by ``tests/scenarios/test_scenarios.py`` and
``tests/benchmarks/bench_triage_accuracy.py``.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.helpers.agent_proc import running_agent
from tests.helpers.archive_proc import read_archive, running_archive
from tests.helpers.procs import ranklog_cmd
from tests.helpers.triage_exit import expected_exit
from tests.scenarios.library import restore_mtimes

ROOT = Path(__file__).resolve().parent
FIELDS = ("status", "rank", "node", "category", "step", "line")


@dataclass(frozen=True)
class Truth:
    failure: bool
    status: str | None = None  # "degraded" (a straggler: no failure); else from `failure`
    rank: int | list[int] | None = None  # a list when the cause is several ranks (a lost node's)
    node: str | None = None  # None: the output never names the machine (only an agent's --host would)
    category: str | None = None
    step: int | None = None
    decisive: str | None = None  # a substring of the decisive line (for a hang: the silent rank's last line)


@dataclass(frozen=True)
class Scenario:
    name: str
    path: Path
    truth: Truth

    @property
    def out(self) -> Path:
        return self.path / "out"

    def nodes(self) -> list[str]:
        """The node folders of ``out/`` (one agent each on the archive path)."""
        return sorted(p.name for p in self.out.iterdir() if p.is_dir())

    def generator(self) -> Path:
        return self.path / "gen" / "generate.py"


def load(path: Path) -> Scenario:
    restore_mtimes(path)
    raw = json.loads((path / "truth.json").read_text())
    known = set(Truth.__dataclass_fields__)
    return Scenario(path.name, path, Truth(**{k: v for k, v in raw.items() if k in known}))


def scenarios() -> list[Scenario]:
    """Every scenario with a truth file, by name."""
    return [load(p.parent) for p in sorted(ROOT.glob("*/truth.json"))]


def _triage(*source: str) -> dict[str, Any]:
    """``ranklog triage … --json``; its exit status must be the one its verdict documents."""
    done = subprocess.run(ranklog_cmd("triage", *source, "--json"), capture_output=True, text=True, timeout=300)
    if done.returncode not in (0, 1, 3):
        raise RuntimeError(f"ranklog triage {' '.join(source)} exited {done.returncode}: {done.stderr[-2000:]}")
    result = json.loads(done.stdout)
    if done.returncode != expected_exit(result):
        raise RuntimeError(f"ranklog triage {' '.join(source)} exited {done.returncode} for "
                           f"{[j['status'] for j in result['jobs_judged']]}")
    return result


def triage_raw(scenario: Scenario) -> dict[str, Any]:
    return _triage("--log_dir", str(scenario.out))


def triage_archive(scenario: Scenario, work: Path | None = None) -> dict[str, Any]:
    """Ship ``out/`` through real agents into a real archive, then triage the archive."""
    with shipped(scenario.out, scenario.nodes(), work) as root:
        return _triage("--archive", str(root))


@contextmanager
def shipped(out: Path, nodes: list[str], work: Path | None = None) -> Iterator[Path]:
    """The root of a real archive that real agents fed, one per node folder ``out/<node>``
    (``--host <node>``, the node's files as its sources, as on the node itself)."""
    with shipped_folders({node: [out / node] for node in nodes}, work) as root:
        yield root


@contextmanager
def shipped_folders(hosts: dict[str, list[Path]], work: Path | None = None) -> Iterator[Path]:
    """The root of a real archive fed by one real agent per host (``--host``), each shipping every file
    under that host's folders."""
    with serving_shipped(hosts, work) as (_, root):
        yield root


@contextmanager
def serving_shipped(hosts: dict[str, list[Path]], work: Path | None = None) -> Iterator[tuple[Any, Path]]:
    """:func:`shipped_folders`, with the archive still running: (its handle, its root)."""
    with ExitStack() as stack:
        if work is None:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ranklog-shipped-")))
        token = work / "token"
        token.write_text(secrets.token_hex(16) + "\n")
        root = work / "archive"
        with running_archive(root, token, log_path=work / "archive.log") as archive:
            for host, folders in hosts.items():
                with running_agent(archive.url, token, work / f"agent-{host}",
                                   sources=[f"{folder}/**/*" for folder in folders], extra_args=["--host", host]) as agent:
                    agent.wait_idle(timeout=300)
            wait_flushed(archive.url, root)
            yield archive, root


def wait_flushed(url: str, root: Path, timeout: float = 60.0) -> None:
    """Until every record the archive acknowledged is in its Parquet files (flushes run every second)."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    deadline = time.monotonic() + timeout
    while True:
        text = httpx.get(f"{url}/metrics", timeout=10).text
        acked = sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
                    if s.name == "ranklog_archive_ingested_records_total")
        if read_archive(root).num_rows >= acked or time.monotonic() > deadline:
            return
        time.sleep(0.3)


def judge(truth: Truth, result: dict[str, Any]) -> dict[str, bool]:
    """Per field: does the verdict agree with the truth? (A no-failure truth needs only the status.)"""
    verdict = result["verdict"]
    status = truth.status or ("failure" if truth.failure else "no failure")
    if status == "no failure":
        ok = verdict["status"] == "no failure"
        return dict.fromkeys(FIELDS, ok)
    ranks = sorted(truth.rank) if isinstance(truth.rank, list) else [truth.rank] if truth.rank is not None else []
    return {
        "status": verdict["status"] == status,
        "rank": verdict["ranks"] == ranks,
        "node": truth.node is None or verdict["hosts"] == [truth.node],
        "category": verdict["category"] == truth.category,
        "step": verdict.get("step") == truth.step,
        "line": truth.decisive is None or truth.decisive in _decisive_text(verdict),
    }


def _decisive_text(verdict: dict[str, Any]) -> str:
    """The decisive record's text — as parsed, and its line as the tool wrote it (read at its source
    and offset) — or, for a verdict resting on silence, the rank's last line (a lost node's: the last
    lines of its ranks)."""
    before = verdict.get("before") or []
    last = {(line.get("host"), line.get("rank")): line for line in before}  # each rank's last line
    lines = [verdict.get("decisive") or {}, *(last.values() if verdict.get("decisive") is None else before[-1:])]
    return "\n".join(f"{line.get('msg') or ''}\n{line.get('exc') or ''}\n{_written(line)}" for line in lines)


def _written(line: dict[str, Any]) -> str:
    source, offset = line.get("source"), line.get("offset")
    if not source or offset is None or not Path(source).is_file():
        return ""
    with open(source, "rb") as handle:
        handle.seek(offset)
        return handle.read(4096).split(b"\n", 1)[0].decode("utf-8", "replace")
