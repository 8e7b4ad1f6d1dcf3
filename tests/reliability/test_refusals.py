"""A record an archive refuses for good never stalls its source (issue 20): real agent → a proxy that
answers 400 to any body holding one specific record → real archive.

The agent bisects the refused batch, ships every other record, re-sends the refused one as a text
record under the same key (its fields as JSON in ``msg``, the answer in ``attrs.ship_error``) and
moves the checkpoint on: lines written afterwards arrive too. Counted by byte offset: every line of
the file must be exactly one archived record.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

from tests.helpers.agent_proc import running_agent
from tests.helpers.archive_proc import running_archive
from tests.helpers.refusing_proxy import refusing_proxy
from tests.reliability.report import Row

pytestmark = pytest.mark.slow
TS = "2026-12-02T13:04:05.123456Z"


def _lines(start: int, count: int, poison: int | None = None) -> bytes:
    return b"".join(json.dumps({"ts": TS, "level": "INFO", "seq": n, "job": "refusal",
                                "msg": "poison" if n == poison else f"line {n}"}).encode() + b"\n"
                    for n in range(start, start + count))


def _archived(root: Path, source: str):
    if not any(root.glob("date=*/hour=*/*.parquet")):
        return None
    table = ds.dataset(str(root), format="parquet", partitioning="hive", exclude_invalid_files=True).to_table(
        columns=["source", "offset", "msg", "format", "attrs"])
    return table.filter(pc.equal(table["source"], source))


def _wait(root: Path, source: str, rows: int, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        table = _archived(root, source)
        if table is not None and table.num_rows >= rows:
            return table
        time.sleep(0.3)
    return _archived(root, source)


def test_a_batch_with_one_refused_record(tmp_path, token_file, record_row):
    log = tmp_path / "logs" / "rank-0.pid-7.0000.jsonl"
    log.parent.mkdir(parents=True)
    first, more = 1000, 200
    log.write_bytes(_lines(1, first, poison=500))
    with running_archive(tmp_path / "archive", token_file, extra_args=("--flush-interval", "200ms")) as archive, \
            refusing_proxy(archive.url, lambda row: row["msg"] == "poison") as proxy, \
            running_agent([proxy.url], token_file, tmp_path / "state", sources=[f"{log.parent}/*.jsonl:ranklog"]) as agent:
        _wait(archive.root, str(log), first)
        with open(log, "ab") as handle:  # the checkpoint moved past the refusal: new lines ship too
            handle.write(_lines(first + 1, more))
        scrape = agent.wait_idle(timeout=90)
        table = _wait(archive.root, str(log), first + more)
    data = log.read_bytes()
    starts = [0, *(i + 1 for i, byte in enumerate(data) if byte == 0x0A)][:-1]
    offsets = table["offset"].to_pylist()
    stand_ins = [r for r in table.to_pylist() if r["attrs"] and "ship_error" in json.loads(r["attrs"])]
    lost = len(set(starts) - set(offsets))
    duplicated = len(offsets) - len(set(offsets))
    quarantined = scrape.value("ranklog_agent_quarantined_records_total")
    record_row(Row(
        "batch with one refused record",
        f"{first:,} lines shipped through a proxy that answers 400 to any body holding the line `poison`, then "
        f"{more} more lines appended", "every line of the file is one archived record at its offset (the refused one "
        "as a text stand-in with attrs.ship_error); the lines written after it arrive",
        written=len(starts), archived=len(offsets), lost=lost, duplicated=duplicated,
        notes=f"{proxy.refused} requests refused while bisecting; {quarantined:.0f} record stored as a text "
              f"stand-in; lost-records metric {scrape.value('ranklog_agent_lost_records_total', reason='refused'):.0f}"))
    assert lost == 0 and duplicated == 0 and len(offsets) == first + more
    (stand_in,) = stand_ins
    assert stand_in["format"] == "text" and json.loads(stand_in["msg"])["msg"] == "poison"
    assert json.loads(stand_in["attrs"])["ship_error"].startswith("HTTP 400")
    assert quarantined == 1 and proxy.refused >= 2
