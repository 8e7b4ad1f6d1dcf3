"""Bad input: the corpus of tests/reliability/bad_corpus.py through the REAL agent into the REAL archive,
through ``ranklog query --log_dir`` on the same files, and through the archive's NDJSON ingest.

One agent and one archive read the whole corpus (plus a file replaced by a directory and one replaced
by a FIFO while the agent tails them); afterwards both must still be alive and serving, and every
non-blank input line must be accounted for (tests.helpers.reliability_coverage): a record at its
exact byte offset, or a continuation line inside the record before it. Lines that do not parse are
kept as ``text`` records with ``parse_error`` in attrs and counted in
``ranklog_agent_parse_errors_total``; the metric must equal the number of such records.

How the awkward items are counted (decided here, checked below):
- a 10 MB line is one record whose msg holds all of it (the parsers cut only past 16 MiB, marking
  the pieces ``line_cut``); nothing is truncated;
- a binary file matched by a broad glob has an unknown name, so the agent reads it as ``text``:
  every non-blank byte run between newlines is a record or a continuation of one (text formats
  group indented lines), invalid UTF-8 replaced; ``query --log_dir`` only reads names it
  recognises as logs and skips it (checked: no record from it);
- a file replaced by a directory or a FIFO: the agent holds the descriptor, reads the old file to
  its end (lines appended just before the replacement included) and never opens the new node.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from tests.helpers import reliability_coverage as coverage
from tests.helpers.agent_proc import running_agent
from tests.helpers.archive_proc import NDJSON, running_archive
from tests.reliability import bad_corpus
from tests.reliability.report import Row

pytestmark = pytest.mark.slow

BEFORE, AFTER = 50, 30  # lines of a replaced file shipped before / appended right before the replacement
REPLACEMENTS = {"replaced_by_directory": os.mkdir, "replaced_by_fifo": os.mkfifo}
WHAT = {item.name: item.what for item in bad_corpus.ITEMS} | {
    "replaced_by_directory": f"a tailed file deleted and a directory created at its path, {AFTER} lines "
                             "appended just before",
    "replaced_by_fifo": f"a tailed file deleted and a FIFO created at its path, {AFTER} lines appended just before",
}
NDJSON_LINES = 40  # per item, each line also sent alone (the binary item has ~8,000 "lines")
COLUMNS = ["source", "source_id", "offset", "msg", "exc", "format", "attrs"]


@dataclass
class CorpusRun:
    root: Path
    paths: dict[str, Path]
    written: dict[str, bytes]  # what each file held (replaced files: every byte written before the replacement)
    archived: pa.Table
    queried: pa.Table
    parse_errors_metric: float
    ndjson: dict[str, list[tuple[int, str]]] = field(default_factory=dict)  # item → (status, body) per request
    alive: dict[str, bool] = field(default_factory=dict)
    follow_up_archived: int = 0
    seconds: float = 0.0

    def agent_records(self, item: str) -> pa.Table:
        return self.archived.filter(pc.equal(self.archived["source"], str(self.paths[item])))

    def query_records(self, item: str) -> pa.Table:
        return self.queried.filter(pc.equal(self.queried["source"], str(self.paths[item])))


def _good_lines(job: str, start: int, count: int) -> bytes:
    return b"".join(json.dumps({"ts": bad_corpus.TS, "level": "INFO", "msg": f"{job} line {n}", "job": job}).encode()
                    + b"\n" for n in range(start, start + count))


def _source_counts(root: Path) -> dict[str, int]:
    if not any(root.glob("date=*/hour=*/*.parquet")):
        return {}
    table = ds.dataset(str(root), format="parquet", partitioning="hive",
                       exclude_invalid_files=True).to_table(columns=["source"])
    return {row["values"]: row["counts"] for row in pc.value_counts(table["source"]).to_pylist()}


def _wait_archived(root: Path, wanted: dict[str, int], timeout: float) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    counts = _source_counts(root)
    while any(counts.get(src, 0) < n for src, n in wanted.items()) and time.monotonic() < deadline:
        time.sleep(0.3)
        counts = _source_counts(root)
    return counts


def _wait_total(root: Path, rows: float, timeout: float = 60) -> None:
    """Wait until `rows` records are in Parquet (ACKed records sit in the WAL until the next flush)."""
    deadline = time.monotonic() + timeout
    while sum(_source_counts(root).values()) < rows:
        assert time.monotonic() < deadline, f"{rows:.0f} acknowledged records not in Parquet after {timeout}s"
        time.sleep(0.3)


def _read(root: Path) -> pa.Table:
    dataset = ds.dataset(str(root), format="parquet", partitioning="hive", exclude_invalid_files=True)
    return dataset.to_table(columns=COLUMNS)


def _post_ndjson(client: httpx.Client, url: str, headers: dict[str, str], body: bytes) -> tuple[int, str]:
    """(status, body); status 0 when the server dropped the connection (what an unhandled error does)."""
    try:
        response = client.post(f"{url}/v1/ingest", content=body, headers=headers)
    except httpx.TransportError as exc:
        return 0, f"no answer: {exc!r}"
    return response.status_code, response.text


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory) -> CorpusRun:
    """One agent + one archive over the whole corpus, the replacements done while the agent tails."""
    import secrets

    tmp = tmp_path_factory.mktemp("bad-input")
    token_file = tmp / "tokens"
    token_file.write_text(secrets.token_hex(16) + "\n")
    root = tmp / "corpus"
    paths = bad_corpus.build(root)
    written = {name: path.read_bytes() for name, path in paths.items()}
    for name in REPLACEMENTS:
        path = root / name / "node0" / "rank-0.pid-100.0000.jsonl"
        path.parent.mkdir(parents=True)
        path.write_bytes(_good_lines(name, 0, BEFORE))
        paths[name] = path
    follow_up = root / "follow_up" / "node0" / "rank-0.pid-101.0000.jsonl"
    started = time.monotonic()
    run = CorpusRun(root, paths, written, pa.table({}), pa.table({}), 0.0)
    with running_archive(tmp / "archive", token_file, log_path=tmp / "archive.log") as archive, \
            running_agent([archive.url], token_file, tmp / "state", sources=[f"{root}/**/*"]) as agent:
        counts = _wait_archived(archive.root, {str(paths[n]): BEFORE for n in REPLACEMENTS}, timeout=60)
        assert all(counts.get(str(paths[n]), 0) >= BEFORE for n in REPLACEMENTS), counts
        for name, make_node in REPLACEMENTS.items():
            with open(paths[name], "ab") as handle:
                handle.write(_good_lines(name, BEFORE, AFTER))
            written[name] = paths[name].read_bytes()
            paths[name].unlink()
            make_node(str(paths[name]))
        follow_up.parent.mkdir(parents=True)
        follow_up.write_bytes(_good_lines("follow_up", 0, 10))
        _wait_archived(archive.root, {str(follow_up): 10}, timeout=90)
        scrape = agent.wait_idle(timeout=90)
        shipped = scrape.value("ranklog_agent_records_shipped_total")
        _wait_total(archive.root, shipped)
        run.parse_errors_metric = scrape.value("ranklog_agent_parse_errors_total")
        run.follow_up_archived = _source_counts(archive.root).get(str(follow_up), 0)
        headers = archive.headers(NDJSON)
        with httpx.Client(timeout=60) as client:
            for item in bad_corpus.ITEMS:
                data = written[item.name]
                answers = [_post_ndjson(client, archive.url, headers, data)]
                answers += [_post_ndjson(client, archive.url, headers, raw + b"\n")
                            for _, raw in coverage.nonblank_lines(data)[:NDJSON_LINES]]
                run.ndjson[item.name] = answers
            run.alive = {
                "agent": agent.proc.poll() is None and agent.scrape().value("ranklog_agent_files_tracked") >= 0,
                "archive": archive.proc.poll() is None
                and client.get(f"{archive.url}/readyz").status_code == 200,
            }
        accepted = sum(json.loads(body)["accepted"] for answers in run.ndjson.values()
                       for status, body in answers if status == 200)
        _wait_total(archive.root, shipped + accepted)
    run.archived = _read(tmp / "archive")
    out = tmp / "query.parquet"
    done = subprocess.run([sys.executable, "-m", "ranklog", "query", "--log_dir", str(root), "--output", str(out)],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    run.queried = pq.read_table(out, columns=COLUMNS)
    run.seconds = time.monotonic() - started
    return run


def _ndjson_note(answers: list[tuple[int, str]]) -> str:
    statuses: dict[int, int] = {}
    for status, _ in answers:
        statuses[status] = statuses.get(status, 0) + 1
    return "NDJSON ingest " + ", ".join(f"{n}×{s}" for s, n in sorted(statuses.items()))


@pytest.mark.parametrize("item", [*WHAT])
def test_every_line_is_accounted_for(corpus_run: CorpusRun, item: str, record_row):
    """Agent → archive: every non-blank line a record at its offset (or a continuation); query --log_dir too."""
    data = corpus_run.written[item]
    agent = coverage.check(data, corpus_run.agent_records(item))
    queried = corpus_run.query_records(item)
    if item in REPLACEMENTS:
        query_note = "query --log_dir: the path is now a directory/FIFO, nothing to read (0 records)"
        query_ok = queried.num_rows == 0
    elif item == "binary":
        query_note = "query --log_dir skips the unrecognised name dump.bin (0 records)"
        query_ok = queried.num_rows == 0
    else:
        query = coverage.check(data, queried)
        query_note = f"query --log_dir: {query.records:,} records, {len(query.problems)} problems"
        query_ok = query.complete and query.records == agent.records
    accounted = agent.records + agent.continuation_lines
    ndjson = corpus_run.ndjson.get(item)
    record_row(Row(
        f"bad input: {item}", WHAT[item],
        "agent → archive: every non-blank line is a record at its byte offset or a continuation inside the "
        "record before it; unparsable lines kept whole as text records; same check on query --log_dir",
        written=agent.lines, archived=agent.records, lost=agent.lines - accounted,
        duplicated=agent.records - len(set(corpus_run.agent_records(item)["offset"].to_pylist())),
        notes="; ".join(filter(None, [
            f"{agent.parse_errors} parse errors (text records)",
            f"{agent.continuation_lines} continuation lines" if agent.continuation_lines else "",
            query_note, _ndjson_note(ndjson) if ndjson else "", "; ".join(agent.problems)]))))
    assert agent.complete, f"{item}: {agent}"
    if item != "binary":
        assert agent.continuation_lines == 0, f"{item}: JSON lines must map one to one: {agent}"
    assert query_ok, f"{item}: {query_note}"


def test_huge_lines_are_kept_whole(corpus_run: CorpusRun):
    """Each 10 MB line is one record holding all of it (no silent truncation)."""
    records = corpus_run.agent_records("huge_lines")
    lengths = sorted(len(m) for m in records["msg"].to_pylist())
    assert lengths[-2:] == [bad_corpus.TEN_MB, bad_corpus.TEN_MB], lengths[-3:]


def test_parse_error_metric_matches_text_records(corpus_run: CorpusRun, record_row):
    """ranklog_agent_parse_errors_total equals the archived records marked parse_error (agent sources)."""
    agent_rows = corpus_run.archived.filter(pc.invert(pc.starts_with(corpus_run.archived["source_id"], "ndjson-body:")))
    marked = sum(1 for attrs in agent_rows["attrs"].to_pylist() if attrs and "parse_error" in json.loads(attrs))
    record_row(Row("bad input: parse-error accounting", "the whole corpus through one agent",
                   "ranklog_agent_parse_errors_total = archived records with parse_error in attrs",
                   notes=f"metric {corpus_run.parse_errors_metric:.0f}, records {marked}"))
    assert marked > 0
    assert corpus_run.parse_errors_metric == marked


def test_processes_survive_the_corpus(corpus_run: CorpusRun, record_row):
    """Agent and archive are alive and serving after everything; a new file still arrives."""
    record_row(Row("bad input: survival", f"agent + archive fed the corpus ({corpus_run.seconds:.0f} s run), "
                   "then a fresh 10-line file", "both processes alive, /metrics and /readyz answer, the fresh "
                   "file is archived", written=10, archived=corpus_run.follow_up_archived,
                   lost=10 - corpus_run.follow_up_archived, notes=json.dumps(corpus_run.alive)))
    assert corpus_run.alive == {"agent": True, "archive": True}
    assert corpus_run.follow_up_archived == 10


def test_archive_ndjson_ingest_refuses_cleanly(corpus_run: CorpusRun, record_row):
    """Every corpus file and every line as an NDJSON body: 200 or a 400 with one error line; never a 5xx.

    Accepted lines are stored (bad parts in attrs): the archive holds exactly as many body-keyed
    records as the 200 answers accepted.
    """
    answers = [a for item in corpus_run.ndjson.values() for a in item]
    server_errors = [(s, b[:200]) for s, b in answers if s >= 500 or s == 0]
    unclear = []
    accepted = 0
    for status, body in answers:
        if status == 200:
            accepted += json.loads(body)["accepted"]
        elif status in (400, 413):
            message = json.loads(body).get("error", "")
            if not message or "\n" in message:
                unclear.append((status, body[:200]))
    stored = pc.sum(pc.starts_with(corpus_run.archived["source_id"], "ndjson-body:").cast(pa.int64())).as_py() or 0
    record_row(Row("bad input: archive NDJSON ingest", "each corpus file as one NDJSON body, then each of its "
                   f"first {NDJSON_LINES} non-blank lines as its own body", "status 200 or 400/413 with one error line, never 5xx; "
                   "records stored = records accepted", written=accepted, archived=stored, lost=accepted - stored,
                   notes=f"{len(answers)} requests: {_ndjson_note(answers)}"))
    assert not server_errors, server_errors
    assert not unclear, unclear
    assert {s for s, _ in answers} <= {200, 400, 413}
    assert stored == accepted
