"""The archive's write-ahead log under damage and cuts (issue 40 items 4 and 5), with real processes.

Damage: 50 acknowledged requests of 100 records sit only in the WAL (flushes an hour apart) when the
archive is SIGKILLed; 16 bytes inside request 10's entry are flipped; the archive starts again. Only
those 100 records may be lost: the other 4,900 reach Parquet, the loss is counted, logged, stored as a
notice that makes ``ranklog integrity`` exit 1 with the count, and the damaged segment is kept aside
byte for byte. Killing the archive again does not report it twice.

Cuts: for each way a WAL can be cut — lost, emptied, torn, damaged in flushed entries, its key file
lost — records A are acknowledged and flushed (clean stop), the cut is made, records B are
acknowledged and the archive is SIGKILLed before flushing them, then started again: every record of A
and B is archived once (sequence numbers of B must not fall at or below what the snapshot covers,
or replay takes them for applied).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import httpx
import pyarrow.compute as pc
import pytest

from tests.helpers.agent_proc import Scrape
from tests.helpers.archive_proc import NDJSON, read_archive, running_archive
from tests.helpers.procs import ranklog_cmd
from tests.reliability.report import Row

pytestmark = pytest.mark.slow
REQUESTS, PER_REQUEST, DAMAGED = 50, 100, 9  # request index 9 is the 10th


def _body(source: str, request: int, n: int = PER_REQUEST) -> bytes:
    return "\n".join(json.dumps({"ts": "2026-12-01T10:00:00Z", "msg": f"{source} request {request} line {i} " + "x" * 60,
                                 "host": "node1", "source_id": source, "offset": (request * n + i) * 100})
                     for i in range(n)).encode()


def _post(archive, body: bytes) -> dict:
    answer = httpx.post(f"{archive.url}/v1/ingest", content=body, timeout=30, headers=archive.headers(NDJSON))
    assert answer.status_code == 200, answer.text
    return answer.json()


def _stored_keys(root: Path) -> list[tuple[str, int]]:
    table = read_archive(root)
    table = table.filter(pc.invert(pc.starts_with(table["source_id"], "ranklog-archive:")))
    return list(zip(table["source_id"].to_pylist(), table["offset"].to_pylist(), strict=True))


def _wait_stored(root: Path, count: int, timeout: float = 30.0) -> list[tuple[str, int]]:
    import time

    deadline = time.monotonic() + timeout
    keys = _stored_keys(root)
    while len(keys) < count and time.monotonic() < deadline:
        time.sleep(0.2)
        keys = _stored_keys(root)
    return keys


def _integrity(root: Path) -> tuple[int, dict, str]:
    json_run = subprocess.run(ranklog_cmd("integrity", "--archive", str(root), "--json"), capture_output=True,
                              text=True, timeout=120)
    text_run = subprocess.run(ranklog_cmd("integrity", "--archive", str(root)), capture_output=True, text=True,
                              timeout=120, env={**os.environ, "COLUMNS": "200"})
    return json_run.returncode, json.loads(json_run.stdout or "{}"), text_run.stdout


def test_one_damaged_wal_entry_costs_that_entry_only(tmp_path, token_file, record_row):
    root, state = tmp_path / "archive", tmp_path / "archive" / "_ranklog" / "w1"
    bodies = [_body("app.log", n) for n in range(REQUESTS)]
    with running_archive(root, token_file, extra_args=("--archive-id", "w1", "--flush-interval", "1h",
                                                       "--snapshot-interval", "1h")) as archive:
        for body in bodies:
            assert _post(archive, body)["accepted"] == PER_REQUEST
        archive.stop(signal.SIGKILL)
        (segment,) = sorted((state / "wal").glob("*.wal"))
        data = bytearray(segment.read_bytes())
        at = data.index(bodies[DAMAGED]) + len(bodies[DAMAGED]) // 2
        data[at:at + 16] = bytes(b ^ 0x5A for b in data[at:at + 16])
        segment.write_bytes(bytes(data))
        damaged_copy, damaged_size = bytes(data), len(data)
        archive.extra_args = ("--archive-id", "w1", "--flush-interval", "200ms")
        archive.start()
        expected = REQUESTS * PER_REQUEST - PER_REQUEST
        keys = _wait_stored(root, expected)
        scrape = Scrape(httpx.get(f"{archive.url}/metrics", timeout=10).text)
        counted = (scrape.value("ranklog_archive_wal_corrupt_entries_total"),
                   scrape.value("ranklog_archive_wal_corrupt_records_total"))
        # killed again before anything else: the damage is not found (nor reported) a second time
        archive.stop(signal.SIGKILL)
        archive.start()
        recount = Scrape(httpx.get(f"{archive.url}/metrics", timeout=10).text).value(
            "ranklog_archive_wal_corrupt_entries_total")
        log = archive.log_text()
    code, report, text = _integrity(root)
    kept = list((state / "wal" / "damaged").glob("*")) if (state / "wal" / "damaged").exists() else []
    lost_keys = {("app.log", (DAMAGED * PER_REQUEST + i) * 100) for i in range(PER_REQUEST)}
    wanted = {("app.log", (n * PER_REQUEST + i) * 100) for n in range(REQUESTS) for i in range(PER_REQUEST)}
    stored = set(keys)
    record_row(Row(
        "WAL entry damaged", f"{REQUESTS} acknowledged requests × {PER_REQUEST} records only in the WAL; archive "
        f"SIGKILLed; 16 bytes flipped inside request {DAMAGED + 1}'s entry; restarted, then SIGKILLed and restarted again",
        "archive rows vs the acknowledged keys; ranklog_archive_wal_corrupt_*; `ranklog integrity` exit status and "
        "count; the damaged segment kept aside byte for byte",
        written=len(wanted), archived=len(keys), lost=len(wanted - stored), duplicated=len(keys) - len(stored),
        notes=f"lost = the damaged entry's {PER_REQUEST} records only; counted entries/records {counted[0]:.0f}/"
              f"{counted[1]:.0f} (after the second restart {recount:.0f}); integrity exit {code}, "
              f"{report.get('archive_wal_lost_records')} records reported lost; segment kept aside: "
              f"{len(kept)} file(s), {'byte-identical to' if kept and kept[0].read_bytes() == damaged_copy else 'DIFFERENT from'} "
              f"the damaged {damaged_size:,}-byte segment (a hard link: never truncated in place)"))
    assert stored == wanted - lost_keys and len(keys) == len(stored)
    assert counted == (1.0, float(PER_REQUEST)) and recount == 0
    assert "lost to WAL damage" in log and "kept as" in log
    assert code == 1 and report["archive_wal_lost_records"] == PER_REQUEST and report["archive_wal_lost_entries"] == 1
    assert "archive WAL damage" in text and f"{PER_REQUEST} record(s)" in text
    assert len(kept) == 1 and kept[0].read_bytes() == damaged_copy


def _cut_lost(wal: Path) -> None:
    for segment in wal.glob("*.wal"):
        segment.unlink()


def _cut_emptied(wal: Path) -> None:
    for segment in wal.glob("*.wal"):
        segment.write_bytes(b"")


def _cut_torn(wal: Path) -> None:
    segment = sorted(wal.glob("*.wal"))[-1]
    data = segment.read_bytes()
    last = max(data.rfind(b"RLW1"), data.rfind(b"RLW3"))  # the last entry's header (either framing)
    with open(segment, "ab") as handle:
        handle.write(data[last:last + 40])  # an append of the same shape that a crash cut short


def _cut_damaged(wal: Path) -> None:
    segment = sorted(wal.glob("*.wal"))[-1]
    data = bytearray(segment.read_bytes())
    at = len(data) // 2
    data[at:at + 16] = bytes(16)
    segment.write_bytes(bytes(data))


def _cut_whole_directory(wal: Path) -> None:
    import shutil

    shutil.rmtree(wal)


CUTS = {"WAL lost": _cut_lost, "WAL segments emptied": _cut_emptied, "torn tail": _cut_torn,
        "damaged flushed entry": _cut_damaged, "WAL directory and key lost": _cut_whole_directory}


def test_sequence_numbers_never_go_backwards_after_any_cut(tmp_path, token_file, record_row):
    results = {}
    for number, (name, cut) in enumerate(CUTS.items()):
        root = tmp_path / f"archive{number}"
        state = root / "_ranklog" / "c1"
        flags = ("--archive-id", "c1")
        with running_archive(root, token_file, extra_args=(*flags, "--flush-interval", "200ms")) as archive:
            for request in range(5):
                _post(archive, _body("a.log", request))
            archive.stop()  # clean: A is in Parquet, the snapshot covers it
            cut(state / "wal")
            archive.extra_args = (*flags, "--flush-interval", "1h", "--snapshot-interval", "1h")
            archive.start()
            for request in range(5):
                assert _post(archive, _body("b.log", request))["accepted"] == PER_REQUEST
            archive.stop(signal.SIGKILL)  # B only in the WAL
            archive.extra_args = (*flags, "--flush-interval", "200ms")
            archive.start()
            keys = _wait_stored(root, 10 * PER_REQUEST, timeout=20)
        code, _, _ = _integrity(root)
        results[name] = (len(set(keys)), len(keys) - len(set(keys)), code)
    written = 10 * PER_REQUEST * len(CUTS)
    archived = sum(stored for stored, _, _ in results.values())
    record_row(Row(
        "WAL cuts, then SIGKILL", f"for each cut ({', '.join(CUTS)}): 500 records acknowledged and flushed (clean "
        "stop), the cut made, 500 more acknowledged, the archive SIGKILLed before flushing them and restarted",
        "every acknowledged (source_id, offset) vs the archive's rows; `ranklog integrity` exit 0 (nothing lost)",
        written=written, archived=sum(stored + dup for stored, dup, _ in results.values()), lost=written - archived,
        duplicated=sum(dup for _, dup, _ in results.values()),
        notes="; ".join(f"{name}: {stored}/{10 * PER_REQUEST}, integrity exit {code}"
                        for name, (stored, _, code) in results.items())))
    assert all(stored == 10 * PER_REQUEST and dup == 0 and code == 0 for stored, dup, code in results.values()), results
