"""What the corpus generators share: run a launcher with the truth sidecar on, say which process
wrote which file (``truth/sources.json``), and finish with ``README.md`` and ``mtimes.json``.

An entry ``tests/corpus/<name>/`` holds ``gen/generate.py``, ``out/`` (the launcher's and the
libraries' output exactly as written, one folder per node), ``truth/`` (the sidecar files the
processes wrote, ``<host>-<pid>.jsonl``, and ``sources.json``), ``README.md`` and ``mtimes.json``.

``sources.json`` is the launcher's own facts, known to the generator that ran it: each output file,
the process streams that feed it, the console prefix the launcher puts before each process's lines
(``[default1]:`` for torchrun's ``--tee``) and the identity the file or prefix reveals.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.corpus.sidecar import ENV_DIR
from tests.scenarios.library import record_mtimes, tool_version
from tests.scenarios.nodes import hosts_file, on_node
from tests.scenarios.ray_gen import CONSOLE
from tests.scenarios.torchrun_gen import TorchrunJob, command_lines
from tests.scenarios.torchrun_gen import run as run_torchrun

ROOT = Path(__file__).resolve().parent
PROGRAMS = ROOT / "programs"
SOURCES = "sources.json"


@dataclass
class Group:
    """Lines of one file written by `feeds` ((host, pid, stream) triples), behind `prefix`."""

    feeds: list[tuple[str, int, str]]
    prefix: str = ""
    identity: dict[str, int] | None = None  # what the file's place or the prefix says of its writer
    forwarded: bool = False  # a launcher copied these lines and leaves some out (Ray drops its markers)

    def as_json(self) -> dict[str, Any]:
        return {"prefix": self.prefix, "feeds": [list(f) for f in self.feeds], "identity": self.identity,
                "forwarded": self.forwarded}


@dataclass
class Source:
    path: str  # relative to out/
    groups: list[Group] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"path": self.path, "groups": [g.as_json() for g in self.groups]}


def processes(truth_dir: Path) -> list[dict[str, Any]]:
    """Each sidecar file's process: host, pid and the last identity it declared."""
    found = []
    for path in sorted(truth_dir.glob("*.jsonl")):
        host, _, pid = path.stem.rpartition("-")
        identity: dict[str, Any] = {}
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                entry = json.loads(line)
                identity.update(entry.get("identity") or {})
        found.append({"host": host, "pid": int(pid), **identity})
    return found


def torchrun_sources(out: Path, truth_dir: Path, role: str = "default",
                     console: str = "torchrun.console.log") -> list[Source]:
    """torchrun's files: ``<host>/<run>/attempt_<a>/<local_rank>/{stdout,stderr}.log`` hold one worker
    each (its rank revealed by the place: local rank from the folder, rank = local rank on one node);
    ``<host>/torchrun.console.log`` holds every worker's lines behind ``[<role><local_rank>]:``."""
    procs = [p for p in processes(truth_dir) if "local_rank" in p]
    single_node = len({p["host"] for p in procs}) == 1
    sources = []
    for proc in procs:
        attempt = proc.get("attempt", 0)
        identity = {"local_rank": proc["local_rank"], **({"rank": proc["rank"]} if single_node else {})}
        for folder in sorted((out / proc["host"]).glob(f"*/attempt_{attempt}/{proc['local_rank']}")):
            for stream in ("stdout", "stderr"):
                sources.append(Source(str((folder / f"{stream}.log").relative_to(out)),
                                      [Group([(proc["host"], proc["pid"], stream)], identity=identity)]))
    launchers = [p for p in processes(truth_dir) if "local_rank" not in p]
    for host in sorted({p["host"] for p in procs}):
        groups = [Group([(host, p["pid"], s) for p in launchers if p["host"] == host for s in ("stdout", "stderr")])]
        for proc in (p for p in procs if p["host"] == host):
            identity = {"local_rank": proc["local_rank"], **({"rank": proc["rank"]} if single_node else {})}
            groups.append(Group([(host, proc["pid"], "stdout"), (host, proc["pid"], "stderr")],
                                prefix=f"[{role}{proc['local_rank']}]:", identity=identity))
        sources.append(Source(f"{host}/{console}", groups))
    return sources


def entry_dir(generator: str) -> Path:
    """Where a generator writes: its entry's folder, or the folder given as its first argument (the
    live test regenerates an entry into a temporary folder)."""
    return Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else Path(generator).resolve().parents[1]


def file_sources(out: Path, truth_dir: Path, moved: Callable[[Path], Path | None] = lambda p: p) -> list[Source]:
    """Files under `out` that a process's logging FileHandler wrote (its sidecar names them): they
    reveal no identity by their place. `moved`: where a file written elsewhere was copied to."""
    writers: dict[str, list[tuple[str, int, str]]] = {}
    for path in sorted(truth_dir.glob("*.jsonl")):
        host, _, pid = path.stem.rpartition("-")
        for line in path.read_text(encoding="utf-8").splitlines():
            stream = json.loads(line).get("stream", "")
            target = moved(Path(stream[5:])) if stream.startswith("file:") else None
            if target is not None and target.is_relative_to(out.resolve()):
                feeds = writers.setdefault(str(target.relative_to(out.resolve())), [])
                if (host, int(pid), stream) not in feeds:
                    feeds.append((host, int(pid), stream))
    return [Source(rel, [Group(feeds)]) for rel, feeds in sorted(writers.items())]


def fresh(entry: Path) -> tuple[Path, Path]:
    """Empty ``out/`` and ``truth/`` of an entry."""
    out, truth = entry / "out", entry / "truth"
    for folder in (out, truth):
        if folder.exists():
            shutil.rmtree(folder)
    truth.mkdir(parents=True)
    return out, truth


def generate_torchrun(generator: str, doc: str, job: TorchrunJob, tools: tuple[str, ...]) -> None:
    """A torchrun entry's whole generator: run `job` into the entry (:func:`entry_dir`), then finish."""
    entry = entry_dir(generator)
    commands, _ = torchrun_entry(entry, job)
    finish(entry, doc=doc, commands=commands, tools=tools)


def torchrun_entry(entry: Path, job: TorchrunJob) -> tuple[list[str], list[int]]:
    """Run `job` under torchrun with the sidecar on; write the sources. (README commands, exit codes)"""
    out, truth = fresh(entry)
    job.env = {**job.env, **sidecar_env(truth)}
    codes = run_torchrun(job, out)
    write_sources(truth, torchrun_sources(out, truth) + file_sources(out, truth))
    return command_lines(job), codes


def sidecar_env(truth_dir: Path) -> dict[str, str]:
    """The environment that starts the sidecar in every Python process of a run (site/sitecustomize.py)."""
    path = [str(ROOT / "site"), str(ROOT.parents[1]), str(ROOT.parents[1] / "exporters"), os.environ.get("PYTHONPATH", "")]
    return {ENV_DIR: str(truth_dir), "PYTHONPATH": os.pathsep.join(p for p in path if p)}


def shared_console(out: Path, truth_dir: Path, console: str) -> list[Source]:
    """A console every process of the run writes to without a prefix (``out/<host>/<console>``):
    it says nothing of who wrote a line."""
    procs = processes(truth_dir)
    return [Source(f"{host}/{console}", [Group([(host, p["pid"], s) for p in procs if p["host"] == host
                                                for s in ("stdout", "stderr")])])
            for host in sorted({p["host"] for p in procs})]


def console_entry(entry: Path, argv: list[str], console: str, env: dict[str, str] | None = None,
                  host: str = "node0", timeout: float = 300) -> tuple[Path, Path, int]:
    """Run a launcher command as node `host` (cwd ``out/<host>``) with the sidecar on, its stdout and
    stderr in ``out/<host>/<console>`` as a job scheduler would keep them. (out, truth, exit code)"""
    out, truth = fresh(entry)
    (out / host).mkdir(parents=True)
    with hosts_file([host]) as hosts, open(out / host / console, "wb") as sink:
        proc = subprocess.Popen(on_node(host, hosts, argv), stdout=sink, stderr=subprocess.STDOUT, cwd=out / host,
                                env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
                                     **(env or {}), **sidecar_env(truth)}, start_new_session=True)
        try:
            code = proc.wait(timeout=timeout)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()
    return out, truth, code


def ray_sources(out: Path, truth_dir: Path) -> list[Source]:
    """Ray's files: ``logs/worker-<id>-<job>-<pid>.out|err`` hold one worker process each (the pid in the
    name); the driver's console holds the driver's own lines and its workers' behind ``(<Actor> pid=N)``;
    files Ray's Python services log to carry their writers' records (:func:`file_sources`)."""
    procs = {p["pid"]: p for p in processes(truth_dir)}
    sources = []
    for path in sorted(out.glob("*/session_*/logs/worker-*")):
        pid = int(path.stem.rsplit("-", 1)[1])
        if pid in procs and path.suffix in (".out", ".err"):
            stream = "stdout" if path.suffix == ".out" else "stderr"
            sources.append(Source(str(path.relative_to(out)),
                                  [Group([(procs[pid]["host"], pid, stream)], identity=_train_rank(procs[pid]))]))
    for console in sorted(out.glob(f"*/{CONSOLE}")):
        sources.append(Source(str(console.relative_to(out)), _ray_console_groups(console, procs)))
    return sources + file_sources(out, truth_dir, lambda p: _copied_session_file(out, p))


def _train_rank(proc: dict[str, Any]) -> dict[str, int] | None:
    """A Ray Train worker's ranks: its controller logs them with its pid ("Started training worker
    group …: (ip=…, pid=N) world_rank=R, local_rank=L"), so every line of that process reveals them."""
    return {"rank": proc["rank"], "local_rank": proc["local_rank"]} if "rank" in proc else None


def _copied_session_file(out: Path, written: Path) -> Path | None:
    """Where ray_gen copied a file of the session's ``logs/`` (``out/<host>/session_…/logs/…``)."""
    parts = written.parts
    at = next((i for i, part in enumerate(parts) if part.startswith("session_")), None)
    if at is None:
        return None
    return next((c for c in out.glob(f"*/{Path(*parts[at:])}") if c.is_file()), None)


# Ray's driver prints each worker's lines behind "(<actor or task> pid=N[, ip=A])", coloured on a terminal
_RAY_PREFIX = re.compile(rb"^((?:\x1b\[\d+m)?\((\w+) pid=(\d+)(?:, ip=[\d.]+)?\)(?:\x1b\[0m)? )", re.M)


def _ray_console_groups(console: Path, procs: dict[int, dict[str, Any]]) -> list[Group]:
    """The driver's own lines, and one group per worker prefix the console shows (Ray's prefix format is
    the launcher's fact; which actor class a pid ran is read from the prefix itself)."""
    driver = [p for p in procs.values() if p.get("role") == "driver"]
    groups = [Group([(p["host"], p["pid"], s) for p in driver for s in ("stdout", "stderr")])]
    seen: set[bytes] = set()
    for match in _RAY_PREFIX.finditer(console.read_bytes()):
        prefix, pid = match.group(1), int(match.group(3))
        if prefix not in seen and pid in procs:
            seen.add(prefix)
            groups.append(Group([(procs[pid]["host"], pid, s) for s in ("stdout", "stderr")], prefix=prefix.decode(),
                                identity=_train_rank(procs[pid]), forwarded=True))
    return groups


def write_sources(truth_dir: Path, sources: list[Source]) -> None:
    if not any(p.get("rank") is not None for p in processes(truth_dir)):
        raise RuntimeError("no worker process wrote a sidecar: the launcher failed (see its console in out/)")
    missing = [s.path for s in sources if not (truth_dir.parent / "out" / s.path).is_file()]
    if missing:
        raise RuntimeError(f"the launcher did not write {missing}")
    (truth_dir / SOURCES).write_text(json.dumps([s.as_json() for s in sources], indent=1) + "\n")


def finish(entry: Path, *, doc: str, commands: list[str], tools: tuple[str, ...]) -> None:
    """README.md (how it was made) and mtimes.json (the files' mtimes, which git does not keep)."""
    versions = ", ".join(f"{name} {tool_version(name)}" for name in tools)
    body = [f"# {entry.name}", "", doc.strip(), "", "## How it was made", "",
            f"`make corpus NAMES={entry.name}` (or `python tests/corpus/{entry.name}/gen/generate.py`) ran, on "
            f"{platform.system()} with Python {platform.python_version()} and {versions}:", "", "```",
            *commands, "```", "",
            "`out/` is what the launcher and the libraries wrote, one folder per node, never edited by hand.",
            "`truth/` is what each process recorded of its own output (tests/corpus/sidecar.py) and, in",
            "`sources.json`, which process wrote which file behind which prefix (the launcher's facts).", ""]
    (entry / "README.md").write_text("\n".join(body))
    record_mtimes(entry)
