"""The forged-key attack (issue 20): a client holding node A's token posts records under node B's
`source_id` (computed as the agent computes it: host, device, inode, head checksum) at offsets 0 and
10^15, before B's agent ships. Real archive, real agent for node B, real HTTP.

* Per-node tokens: posted as B's host, the forgery is refused (403, counted, logged without the
  token); posted as A's own host it lands in A's dedup namespace and shadows nothing. B's real
  records are all stored: 0 lost, 0 duplicated.
* Shared token (trusting mode): the forgery is accepted and B's real record at offset 0 is taken for
  a duplicate — the attack still succeeds, but B's agent reports it: the archive answered a first
  send "duplicate", counted in ``ranklog_agent_unexpected_duplicates_total`` and logged.

B's agent ships through a gate (tests.helpers.refusing_proxy, closed: 429) so the forgery provably
comes first; the file appears after the agent started, so every byte is a first send.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ranklog.file_identity import identify, make_source_id
from tests.helpers.agent_proc import Scrape, running_agent
from tests.helpers.archive_proc import ARROW, NDJSON, arrow_body, read_archive, running_archive
from tests.helpers.refusing_proxy import refusing_proxy
from tests.reliability.report import Row

pytestmark = pytest.mark.slow
TS = "2026-12-02T13:04:05.123456Z"
FIRST, MORE = 1000, 200
TOKEN_A, TOKEN_B, SHARED = "node-a-token-5b1f0c9e2d", "node-b-token-77aa31c4e0", "shared-token-0c4e2b9d11"


def _lines(start: int, count: int) -> bytes:
    return b"".join(json.dumps({"ts": TS, "level": "INFO", "seq": n, "job": "forged", "msg": f"line {n}"}).encode()
                    + b"\n" for n in range(start, start + count))


def _forgery(host: str, source_id: str, content_type: str) -> bytes:
    offsets = [0, 10**15]
    if content_type == NDJSON:
        return "\n".join(json.dumps({"ts": TS, "msg": "forged", "host": host, "source": "/forged.log",
                                     "source_id": source_id, "offset": o}) for o in offsets).encode()
    n = len(offsets)
    return arrow_body(pa.table({"ts": pa.array([1_796_220_000_000_000_000] * n, pa.timestamp("ns", tz="UTC")),
                                "level": ["INFO"] * n, "msg": ["forged"] * n, "host": [host] * n, "ip": [""] * n,
                                "source": ["/forged.log"] * n, "source_id": [source_id] * n,
                                "offset": pa.array(offsets, pa.int64()), "format": ["text"] * n}))


def _attack(url: str, token: str, host: str, source_id: str) -> list[tuple[int, str]]:
    answers = []
    for content_type in (NDJSON, ARROW):
        answer = httpx.post(f"{url}/v1/ingest", content=_forgery(host, source_id, content_type), timeout=30,
                            headers={"Authorization": f"Bearer {token}", "Content-Type": content_type})
        answers.append((answer.status_code, answer.text))
    return answers


def _scenario(tmp_path: Path, archive_tokens: str, agent_token: str, attacks: list[tuple[str, str]]):
    """Run the attack against node B's agent; returns (B's archived records, forged rows, answers,
    agent scrape, archive metrics text, archive log, agent log, line starts of B's file)."""
    tokens = tmp_path / "tokens"
    tokens.write_text(archive_tokens)
    agent_tokens = tmp_path / "agent-token"
    agent_tokens.write_text(agent_token + "\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    staging = tmp_path / "staging.jsonl"
    with running_archive(tmp_path / "archive", tokens, extra_args=("--flush-interval", "200ms")) as archive, \
            refusing_proxy(archive.url, lambda row: False, closed=True) as gate, \
            running_agent([gate.url], agent_tokens, tmp_path / "state", sources=[f"{logs}/*.jsonl:ranklog"],
                          extra_args=["--host", "node-b"]) as agent:
        agent.wait_for(lambda s: s.value("ranklog_agent_files_tracked") == 0, what="agent up")
        time.sleep(1.0)  # past the agent's first poll: the file below is new to it
        staging.write_bytes(_lines(1, FIRST))
        target = logs / "rank-0.pid-7.0000.jsonl"
        os.rename(staging, target)  # appears whole: the agent's head checksum is the one computed here
        fd = os.open(target, os.O_RDONLY)
        try:
            source_id = make_source_id("node-b", identify(fd, os.fstat(fd)))
        finally:
            os.close(fd)
        agent.wait_for(lambda s: s.value("ranklog_agent_ship_failures_total", reason="throttled") >= 1,
                       what="agent held at the gate")
        answers = [a for host, token in attacks for a in _attack(archive.url, token, host, source_id)]
        gate.closed = False
        with open(target, "ab") as handle:
            handle.write(_lines(FIRST + 1, MORE))
        scrape = agent.wait_idle(timeout=90)
        deadline = time.monotonic() + 30
        table = read_archive(archive.root)
        while time.monotonic() < deadline:
            table = read_archive(archive.root)
            mine = table.filter(pc.equal(table["source"], str(target)))
            if mine.num_rows >= FIRST + MORE - 1:
                break
            time.sleep(0.3)
        archive_metrics = httpx.get(f"{archive.url}/metrics", timeout=10).text
    data = target.read_bytes()
    starts = [0, *(i + 1 for i, byte in enumerate(data) if byte == 0x0A)][:-1]
    real = table.filter(pc.and_(pc.equal(table["source_id"], source_id), pc.equal(table["host"], "node-b")))
    real = real.filter(pc.invert(pc.equal(real["msg"], "forged")))
    forged = table.filter(pc.equal(table["msg"], "forged"))
    return (real, forged, answers, scrape, Scrape(archive_metrics), archive.log_path.read_text(),
            agent.log_path.read_text(), starts)


def test_forged_keys_with_per_node_tokens_are_refused(tmp_path, record_row):
    real, forged, answers, agent, archive, archive_log, _, starts = _scenario(
        tmp_path, f"{TOKEN_A} node-a\n{TOKEN_B} node-b\n", TOKEN_B, [("node-b", TOKEN_A), ("node-a", TOKEN_A)])
    offsets = real["offset"].to_pylist()
    lost, duplicated = len(set(starts) - set(offsets)), len(offsets) - len(set(offsets))
    refused = archive.value("ranklog_archive_refused_records_total", reason="host_not_allowed")
    unexpected = agent.value("ranklog_agent_unexpected_duplicates_total")
    record_row(Row(
        "forged-key attack, per-node tokens",
        f"node A's token posts 2 records under node B's source_id (offsets 0 and 10^15; NDJSON and Arrow) as host "
        f"node-b, then as its own host node-a, before B's agent ships its {FIRST:,} + {MORE} lines",
        "as node-b: 403 host_not_allowed, counted and logged (no token in the log); as node-a: stored in A's "
        "namespace, shadowing nothing; every line of B's file is one archived record at its offset",
        written=len(starts), archived=len(offsets), lost=lost, duplicated=duplicated,
        notes=f"answers {', '.join(str(status) for status, _ in answers)}; "
              f"ranklog_archive_refused_records_total{{reason=host_not_allowed}} {refused:.0f}; "
              f"{forged.num_rows} forged records stored, all as host node-a; agent unexpected duplicates "
              f"{unexpected:.0f}"))
    assert [status for status, _ in answers] == [403, 403, 200, 200]
    assert all(json.loads(text)["hosts"] == ["node-b"] for status, text in answers if status == 403)
    assert lost == 0 and duplicated == 0 and len(offsets) == FIRST + MORE
    assert refused == 4 and unexpected == 0
    assert set(forged["host"].to_pylist()) == {"node-a"}
    assert "refused 2 record(s) of host(s) node-b" in archive_log and TOKEN_A not in archive_log


def test_forged_keys_with_a_shared_token_are_reported_by_the_agent(tmp_path, record_row):
    real, forged, answers, agent, _, _, agent_log, starts = _scenario(
        tmp_path, f"{SHARED}\n", SHARED, [("node-b", SHARED)])
    offsets = real["offset"].to_pylist()
    lost, duplicated = len(set(starts) - set(offsets)), len(offsets) - len(set(offsets))
    unexpected = agent.value("ranklog_agent_unexpected_duplicates_total")
    record_row(Row(
        "forged-key attack, shared token (trusting mode)",
        f"a holder of the one shared token posts 2 records under node B's source_id (offsets 0 and 10^15) as "
        f"host node-b, before B's agent ships its {FIRST:,} + {MORE} lines",
        "the attack is not refused (every holder is trusted) but reported: B's agent counts the first send "
        "answered 'duplicate' in ranklog_agent_unexpected_duplicates_total and logs it (alert "
        "RanklogAgentUnexpectedDuplicates); lost = B's record at offset 0, shadowed by the forgery",
        written=len(starts), archived=len(offsets), lost=lost, duplicated=duplicated,
        notes=f"answers {', '.join(str(status) for status, _ in answers)}; agent unexpected duplicates "
              f"{unexpected:.0f}; per-node tokens prevent the loss (row above)"))
    assert [status for status, _ in answers] == [200, 200]  # the Arrow copy is the NDJSON one's duplicate
    assert json.loads(answers[1][1])["duplicates"] == 2
    assert lost == 1 and 0 not in offsets and duplicated == 0 and len(offsets) == FIRST + MORE - 1
    assert unexpected == 1 and sorted(forged["offset"].to_pylist()) == [0, 10**15]  # the forgery holds B's key
    assert "never sent before" in agent_log and SHARED not in agent_log
