"""`ranklog query --rank R` returns every record rank R wrote, and nothing else, in every scenario of the
library — from the raw folder and through real agents into a real archive — and Loki's ``{rank="R"}``
answers the same records.

What rank R wrote is taken from the files and their launcher, read here with a few regular
expressions of this test's own (never with ranklog):

- torchrun: ``<node>/<run>_<suffix>/attempt_<n>/<local rank>/`` holds that local rank's
  ``stdout.log``, ``stderr.log`` and ``error.json``. Its global rank is what torch elastic's
  rendezvous result in the node's console pairs with the local rank for that attempt
  (``restart_count=<n>``, ``local_ranks=[…]``, ``global_ranks=[…]``); a scenario with a single node
  folder whose console has no such result runs one node, where global rank = local rank. A line of
  the console that starts with torchrun's ``[<role><local rank>]:`` prefix is that local rank's.
- Ray: a worker process's files (``worker-<id>-<job>-<pid>.out|err``, ``python-core-worker-<id>_<pid>.log``)
  belong to the rank its own worker files print as ``[Rank N]`` (one N; a worker printing none or
  several belongs to no rank). A line of the driver's console forwarded with ``(<name> pid=<pid>…)``,
  or a JSON line whose ``process`` is the pid (Ray's JSON logging), is that pid's.

Records are compared by (source, offset): the record set of a rank is every record of its files and
every record whose first line carries its prefix, as the unfiltered query lists them.
"""

from __future__ import annotations

import calendar
import contextlib
import io
import json
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from ranklog import cli
from tests.scenarios.harness import Scenario, scenarios, serving_shipped

SCENARIOS = scenarios()
# ranklog's own logger names its files after the process's RANK (its records and flight recorder dumps)
_RANKLOG_FILE = re.compile(r"/(?:flight-recorder\.)?rank-(?P<rank>\d+)\.pid-\d+\.[^/]*jsonl$")
_RUN_FILE = re.compile(r"/attempt_(?P<attempt>\d+)/(?P<local>\d+)/(?:stdout\.log|stderr\.log|error\.json)$")
_RENDEZVOUS = re.compile(rb"(restart_count|local_ranks|global_ranks)=\[?([\d, ]*)\]?\s*$", re.MULTILINE)
_TEE = re.compile(rb"^\[[A-Za-z_][\w\-]*?(\d+)\]:")
_WORKER = re.compile(r"(?:^|/)(?:worker-[0-9a-f]+-[0-9a-f]+-(?P<pid>\d+)\.(?:out|err)"
                     r"|python-core-worker-[0-9a-f]+_(?P<core>\d+)\.log)$")
_RANK_MARK = re.compile(rb"\[Rank (\d+)\]")
_FORWARDED = re.compile(rb"^(?:\x1b\[\d+m)?\((?:[^\s()]+ )?pid=(\d+)")
Key = tuple[str, int]
COLUMNS = "source,offset,rank,ts,msg,exc"


class Truth:
    """Who wrote which line, from the files and the launcher (see the module docstring)."""

    def __init__(self, scenario: Scenario) -> None:
        self.out = scenario.out.resolve()
        self.nodes = [p for p in sorted(self.out.iterdir()) if p.is_dir()]
        self.file_rank: dict[str, int] = {}
        # console → [(offset from which it holds, local → global)]; None: one node, global = local
        self.tee: dict[str, list[tuple[int, dict[int, int]]] | None] = {}
        self.pid_rank: dict[tuple[str, int], int] = {}  # (node, pid) → rank
        for node in self.nodes:
            self._torchrun(node)
            self._ray(node)

    def _torchrun(self, node: Path) -> None:
        by_attempt: dict[int, dict[int, int]] = {}
        for console in (p for p in node.glob("*.log") if p.is_file()):
            results, attempt, local = [], 0, None
            for found in _RENDEZVOUS.finditer(console.read_bytes()):
                numbers = [int(v) for v in found.group(2).replace(b" ", b"").split(b",") if v]
                if found.group(1) == b"restart_count":
                    attempt = numbers[0]
                elif found.group(1) == b"local_ranks":
                    local = numbers
                elif local is not None:
                    by_attempt[attempt] = dict(zip(local, numbers, strict=True))
                    results.append((found.end(), by_attempt[attempt]))
            self.tee[str(console)] = results
        single = len(self.nodes) == 1 and not by_attempt
        for path in node.rglob("*"):
            own = _RANKLOG_FILE.search(str(path))
            if own is not None:
                self.file_rank[str(path)] = int(own["rank"])
                continue
            found = _RUN_FILE.search(str(path))
            if found is None or not path.stat().st_size:  # an empty file holds no rank's records
                continue
            attempt, local = int(found["attempt"]), int(found["local"])
            if single:
                self.file_rank[str(path)] = local
            elif local in by_attempt.get(attempt, {}):
                self.file_rank[str(path)] = by_attempt[attempt][local]
        if single:
            for console, results in self.tee.items():
                if not results and Path(console).parent == node:
                    self.tee[console] = None

    def _ray(self, node: Path) -> None:
        by_pid: dict[int, list[Path]] = defaultdict(list)
        for path in node.rglob("*"):
            found = _WORKER.search(str(path))
            if found:
                by_pid[int(found["pid"] or found["core"])].append(path)
        for pid, paths in by_pid.items():
            ranks = {int(r) for p in paths if not p.name.startswith("python-core")
                     for r in _RANK_MARK.findall(p.read_bytes())}
            if len(ranks) == 1:
                rank = ranks.pop()
                self.pid_rank[(node.name, pid)] = rank
                for p in paths:
                    self.file_rank[str(p)] = rank

    def rank_of(self, source: str, offset: int) -> int | None:
        """The rank that wrote the record at `offset` of `source` (None: no rank, or not known)."""
        if source in self.file_rank:
            return self.file_rank[source]
        path = Path(source)
        if not path.is_file():
            return None
        with open(path, "rb") as handle:
            handle.seek(offset)
            line = handle.readline()
        tee = _TEE.match(line)
        if tee and source in self.tee:
            local = int(tee.group(1))
            results = self.tee[source]
            if results is None:
                return local
            in_force = [pairs for start, pairs in results if start <= offset]
            return in_force[-1].get(local) if in_force else None
        forwarded = _FORWARDED.match(line)
        pid = int(forwarded.group(1)) if forwarded else _json_process(line)
        if pid is not None:
            return self.pid_rank.get((path.relative_to(self.out).parts[0], pid))
        return None

    def expected(self, records: list[dict]) -> dict[int, list[dict]]:
        """rank → its records, among `records` (every record of the scenario)."""
        out: dict[int, list[dict]] = defaultdict(list)
        for record in records:
            rank = self.rank_of(record["source"], record["offset"])
            if rank is not None:
                out[rank].append(record)
        return dict(out)


def _json_process(line: bytes) -> int | None:
    """The ``process`` of a Ray JSON log line (a worker's line the driver's console forwards)."""
    if not line.startswith(b"{"):
        return None
    try:
        process = json.loads(line).get("process")
    except (ValueError, AttributeError):
        return None
    return process if isinstance(process, int) else None


def _query(*args: str) -> list[dict]:
    """``ranklog query … --format ndjson``'s records, the CLI's own entry point run in this process
    (a few hundred queries: a process each would cost a Python start and ranklog's imports each)."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    with contextlib.redirect_stdout(out):
        code = cli.main(["query", *args, "--format", "ndjson", "--columns", COLUMNS, "--sort", "none"])
    assert code == 0, f"ranklog query {' '.join(args)} exited {code}"
    return [json.loads(line) for line in out.buffer.getvalue().decode().splitlines() if line.strip()]


def _keys(records: list[dict]) -> set[Key]:
    return {(r["source"], r["offset"]) for r in records}


def _line(record: dict) -> tuple[int, str]:
    """A record as a Loki entry shows it: (time in ns, message and exception text)."""
    ts = datetime.fromisoformat(record["ts"].replace("Z", "+00:00"))
    ns = (calendar.timegm(ts.utctimetuple()) * 1_000_000 + ts.microsecond) * 1000
    return ns, record["msg"] if not record.get("exc") else f"{record['msg']}\n{record['exc']}"


def _check(scenario: Scenario, where: list[str], loki: Callable[[int], Counter] | None = None) -> None:
    """Every rank's records by --rank (and by Loki's {rank=…}), against the truth."""
    truth = Truth(scenario)
    expected = truth.expected(_query(*where))
    assert bool(expected) == bool(truth.file_rank or truth.pid_rank)
    for rank, records in sorted(expected.items()):
        keys = _keys(records)
        got = _keys(_query(*where, "--rank", str(rank)))
        missing, extra = keys - got, got - keys
        assert not missing and not extra, (
            f"{scenario.name} {where[0]} --rank {rank}: {len(missing)} of {len(keys)} records missing "
            f"(e.g. {sorted(missing)[:3]}), {len(extra)} records of other writers (e.g. {sorted(extra)[:3]})")
        if loki is not None:
            lines = loki(rank)
            want = Counter(_line(r) for r in records)
            assert lines == want, (f"{scenario.name} Loki {{rank=\"{rank}\"}}: {sum((want - lines).values())} "
                                   f"missing, {sum((lines - want).values())} of other writers")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_query_rank_returns_every_record_of_the_rank_from_the_raw_folder(scenario):
    _check(scenario, ["--log_dir", str(scenario.out.resolve())])


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_query_rank_and_loki_return_every_record_of_the_rank_through_agent_and_archive(scenario, tmp_path):
    with serving_shipped({node: [scenario.out.resolve() / node] for node in scenario.nodes()}, tmp_path) as (
            archive, root):

        def loki(rank: int) -> Counter:
            answer = httpx.get(f"{archive.url}/loki/api/v1/query_range", timeout=60,
                               headers={"Authorization": f"Bearer {archive.token}"},
                               params={"query": f'{{rank="{rank}"}}', "start": "0", "end": str(time.time_ns()),
                                       "limit": "5000", "direction": "forward"})
            answer.raise_for_status()
            lines: Counter = Counter()
            for stream in answer.json()["data"]["result"]:
                assert stream["stream"].get("rank") == str(rank)
                lines.update((int(ts), line) for ts, line in stream["values"])
            return lines

        _check(scenario, ["--archive", str(root)], loki)
