"""`ranklog stats` counts and `ranklog trace` timelines, checked against the corpus."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ranklog.query.filters import QuerySpec
from ranklog.query.sources import open_source
from ranklog.query.stats import compute_stats
from ranklog.query.trace import build_trace
from ranklog.record import ts_ns
from tests.helpers.corpus import generate
from tests.helpers.procs import REPO, ranklog_cmd
from tests.helpers.query_data import write_archive


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> tuple[pa.Table, str]:
    table = generate(9000, span_s=3 * 3600, hosts=3, ranks_per_host=2, seed=21)
    root = tmp_path_factory.mktemp("stats")
    write_archive(table, root, files_per_hour=2)
    return table, str(root)


def test_stats_match_the_records(archive):
    table, root = archive
    stats = compute_stats(open_source(archive=root), QuerySpec())
    assert stats["total"] == table.num_rows
    assert {row["level"]: row["records"] for row in stats["by_level"]} == Counter(table["level"].to_pylist())
    hosts = Counter(table["host"].to_pylist())
    assert {row["host"]: row["records"] for row in stats["by_host"]} == hosts
    errors = Counter(h for h, lvl in zip(table["host"].to_pylist(), table["level"].to_pylist(), strict=True)
                     if lvl in ("ERROR", "CRITICAL"))
    assert {row["host"]: row["errors"] for row in stats["by_host"]} == errors
    assert {row["rank"]: row["records"] for row in stats["by_rank"]} == Counter(table["rank"].to_pylist())
    assert sum(b["records"] for b in stats["over_time"]) == table.num_rows
    assert stats["bucket_seconds"] == 300 and 30 <= len(stats["over_time"]) <= 48


def test_stats_cli_json_with_filters(archive):
    table, root = archive
    proc = subprocess.run(ranklog_cmd("stats", "--archive", root, "--level", "ERROR", "--bucket", "1h", "--json"),
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    assert stats["total"] == sum(1 for lvl in table["level"].to_pylist() if lvl in ("ERROR", "CRITICAL"))
    assert stats["bucket_seconds"] == 3600 and len(stats["over_time"]) in (3, 4)
    text = subprocess.run(ranklog_cmd("stats", "--archive", root, "--format", "table"), capture_output=True, text=True,
                          timeout=120, cwd=REPO)
    assert text.returncode == 0 and "per node" in text.stdout and "gpu-node-002" in text.stdout


def test_trace_timeline_and_slowest_hop(archive):
    table, root = archive
    counts = Counter(pc.drop_null(table["trace_id"]).to_pylist())
    trace, expected = counts.most_common(1)[0]
    report = build_trace(open_source(archive=root), trace)
    assert report["records"] == expected >= 3
    selected = table.filter(pc.equal(table["trace_id"], trace)).sort_by("ts")
    ns = ts_ns(selected["ts"]).tolist()
    gaps = [(b - a) / 1e6 for a, b in itertools.pairwise(ns)]
    assert [row["delta_ms"] for row in report["timeline"]] == [None, *gaps]
    assert report["slowest_step"]["delta_ms"] == max(gaps)
    nodes = {f"{h}/rank {r}" for h, r in zip(selected["host"].to_pylist(), selected["rank"].to_pylist(), strict=True)}
    assert {g["node"] for g in report["groups"]} == nodes
    assert sum(g["records"] for g in report["groups"]) == expected
    assert all(row["hop"] == (i > 0 and row["node"] != report["timeline"][i - 1]["node"])
               for i, row in enumerate(report["timeline"]))


def test_trace_cli(archive):
    table, root = archive
    trace = pc.drop_null(table["trace_id"])[0].as_py()
    shown = subprocess.run(ranklog_cmd("trace", trace, "--archive", root, "--format", "table"), capture_output=True, text=True,
                           timeout=120, cwd=REPO, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin",
                                                      **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"}})
    assert shown.returncode == 0 and trace in shown.stdout and "per node/rank" in shown.stdout
    missing = subprocess.run(ranklog_cmd("trace", "0" * 32, "--archive", root, "--json"), capture_output=True,
                             text=True, timeout=120, cwd=REPO)
    assert missing.returncode == 1 and json.loads(missing.stdout)["records"] == 0
