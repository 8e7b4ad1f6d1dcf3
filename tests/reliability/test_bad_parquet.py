"""A bad Parquet file is quarantined, not fatal (issue 40 item 7).

4,000 records of two closed hours are archived; then three files are dropped into the first hour's
folder: an empty ``.parquet``, one of random bytes and one half-copied (the first half of a real
file). Every reader must answer with the rest and name the files: ``ranklog query --count`` and
``stats`` (exit 0, a warning on stderr), ``triage`` (no crash), ``/v1/query`` (the count, and the files
in ``unreadable_files``; the CLI's remote query warns), the Loki API (200 with ``warnings``);
``ranklog integrity`` exits 1 listing them. Then compaction runs: it moves the three aside to
``_ranklog/quarantine/`` and compacts the hour; ``ranklog_archive_unreadable_files`` is 3;
integrity keeps failing until the quarantined files are removed.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import httpx
import pyarrow.dataset as ds
import pytest

from tests.archive.conftest import PAST_NS
from tests.archive.util import post_table
from tests.helpers.agent_proc import Scrape
from tests.helpers.archive_proc import running_archive
from tests.helpers.corpus import generate
from tests.helpers.procs import ranklog_cmd
from tests.reliability.report import Row

pytestmark = pytest.mark.slow
RECORDS = 4000


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(ranklog_cmd(*args), capture_output=True, text=True, timeout=300)


def _visible_rows(root) -> int:
    files = [str(p) for p in root.glob("date=*/hour=*/*.parquet")]
    return ds.dataset(files, format="parquet", exclude_invalid_files=True).count_rows() if files else 0


def test_bad_parquet_files_are_skipped_reported_and_moved_aside(tmp_path, token_file, record_row):
    root = tmp_path / "archive"
    corpus = generate(RECORDS, start_ns=PAST_NS, span_s=7200, hosts=2, ranks_per_host=4, seed=11)
    flags = ("--archive-id", "q1", "--flush-interval", "200ms")
    with running_archive(root, token_file, extra_args=flags) as archive:
        post_table(archive, corpus)
        deadline = time.monotonic() + 30
        while _visible_rows(root) < RECORDS and time.monotonic() < deadline:
            time.sleep(0.2)
        hour = sorted(root.glob("date=*/hour=*"))[0]
        good = next(hour.glob("*.parquet")).read_bytes()
        bad = {"empty": b"", "random": os.urandom(50_000), "half-copied": good[: len(good) // 2]}
        names = [f"dropped-{name}.parquet" for name in bad]
        for name, data in zip(names, bad.values(), strict=True):
            (hour / name).write_bytes(data)

        readers = {}
        for command in (("query", "--archive", str(root), "--count"), ("stats", "--archive", str(root)),
                        ("triage", "--archive", str(root)), ("integrity", "--archive", str(root), "--json")):
            done = _run(*command)
            readers[command[0]] = done
        remote = _run("query", "--archive", archive.url, "--token-file", str(token_file), "--count")
        http_count = httpx.post(f"{archive.url}/v1/query", json={"spec": {}, "count": True}, timeout=60,
                                headers={"Authorization": f"Bearer {archive.token}"})
        loki = httpx.get(f"{archive.url}/loki/api/v1/query_range", timeout=60,
                         params={"query": '{host=~".+"}', "start": str(PAST_NS - 10**9),
                                 "end": str(PAST_NS + 7200 * 10**9), "limit": "10"},
                         headers={"Authorization": f"Bearer {archive.token}"})
        archive.stop()

        archive.extra_args = (*flags, "--compaction-interval", "1s")
        archive.start()
        quarantine = root / "_ranklog" / "quarantine"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (len(list(quarantine.rglob("*.unreadable"))) < 3
                                               or len(list(hour.glob("*.parquet"))) > 1):
            time.sleep(0.5)
        time.sleep(11)  # the storage scan (every 10 s) sets the gauge
        gauge = Scrape(httpx.get(f"{archive.url}/metrics", timeout=10).text).value("ranklog_archive_unreadable_files")
        log = archive.log_text()
    moved = sorted(p.name for p in quarantine.rglob("*.unreadable")) if quarantine.exists() else []
    after = _run("query", "--archive", str(root), "--count")
    still = _run("integrity", "--archive", str(root))
    for path in moved:
        next(quarantine.rglob(path)).unlink()
    cleared = _run("integrity", "--archive", str(root))

    def count_of(done: subprocess.CompletedProcess) -> str:
        return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "-"

    codes = {name: done.returncode for name, done in readers.items()}
    warned = all(name in readers["query"].stderr for name in names)
    loki_warnings = loki.json().get("warnings", []) if loki.headers.get("content-type", "").startswith(
        "application/json") else []
    record_row(Row(
        "bad Parquet files", f"{RECORDS:,} records in two closed hours; an empty, a random and a half-copied "
        ".parquet dropped into the first hour; every reader run; then compaction",
        "readers answer with the rest and name the files (CLI warnings, /v1/query unreadable_files, Loki warnings), "
        "integrity exit 1; compaction moves them aside and compacts the hour; ranklog_archive_unreadable_files",
        written=RECORDS, archived=int(count_of(readers["query"])) if count_of(readers["query"]).isdigit() else None,
        notes=f"exit codes {codes} (query --count {count_of(readers['query'])}, stderr names all 3: {warned}); "
              f"remote query exit {remote.returncode}, count {count_of(remote)}; /v1/query {http_count.status_code} "
              f"{http_count.text[:60]}…; Loki {loki.status_code} with {len(loki_warnings)} warning(s); moved aside "
              f"{len(moved)} file(s), hour compacted to {len(list(hour.glob('*.parquet')))} file(s), gauge "
              f"{gauge:.0f}; after compaction query --count {count_of(after)}; integrity exit {still.returncode} "
              f"until the quarantined files are removed, then {cleared.returncode}"))
    assert readers["query"].returncode == 0 and count_of(readers["query"]) == str(RECORDS) and warned
    assert readers["stats"].returncode == 0 and readers["triage"].returncode in (0, 1, 3)
    assert "Traceback" not in "".join(d.stderr for d in readers.values())
    listed = [row["path"] for row in json.loads(readers["integrity"].stdout)["unreadable_files"]]
    assert readers["integrity"].returncode == 1 and sorted(os.path.basename(path) for path in listed) == sorted(names)
    assert remote.returncode == 0 and count_of(remote) == str(RECORDS) and "unreadable" in remote.stderr
    assert http_count.status_code == 200 and http_count.json()["count"] == RECORDS
    assert len(http_count.json()["unreadable_files"]) == 3
    assert loki.status_code == 200 and len(loki_warnings) == 3 and loki.json()["data"]["result"]
    assert len(moved) == 3 and len(list(hour.glob("*.parquet"))) == 1 and gauge == 3
    assert "moved unreadable Parquet file" in log and count_of(after) == str(RECORDS)
    assert still.returncode == 1 and cleared.returncode == 0
