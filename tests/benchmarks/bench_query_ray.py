"""Query benchmark: the local engine vs ``--engine ray`` with 1, 2 and 4 workers, and what it projects.

    python tests/benchmarks/bench_query_ray.py [--quick] [--runs N]

Archive: bench_query's corpus — 10M records over 30 days in 720 hourly compacted files (--quick: 60k
over 3 days) — written by the archive's writer and cached like bench_query's (the archive only).

Cluster: a real Ray cluster on this machine (tests/helpers/ray_cluster.py): a head and a second node
process with 2 CPUs each. "N workers" = at most N scan tasks in flight (``RayRunner.in_flight``): N
worker processes scanning at a time, each with Arrow's pool sized to its one CPU. This process is the
driver: it connects once (timed apart), and the first round of every shape (which starts the
workers and builds missing query indexes) is not timed; its answer must equal the local engine's.

Shapes: bench_query's (a) window + level + host, (b) one trace id, (c) a regex search (severe-rows
index), and (d) a full scan: a case-insensitive substring search, which has no required literal, so
no index helps and msg + exc of every row of every file is decoded and searched.

Per-file cost, from (d): s/file per worker = wall × workers / files; records/s per worker =
records / (wall × workers). The projection for 30 days × 100k lines/s (2.6e11 records) on N nodes
divides that many records by the measured Ray per-worker rate times the workers of N nodes; its
assumptions are printed with it. This machine has 2 cores shared with other work: Ray adds no
hardware here (4 workers oversubscribe it), so its figures are the per-worker cost, not a speed-up.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "exporters"), str(REPO)]

from ranklog.query import engine  # noqa: E402
from ranklog.query.filters import QuerySpec  # noqa: E402
from ranklog.query.ray_engine import RayRunner  # noqa: E402
from ranklog.query.sources import open_source  # noqa: E402
from tests.benchmarks.bench_query import build_corpus, query_shapes  # noqa: E402
from tests.helpers.ray_cluster import running_ray_cluster  # noqa: E402

WORKERS = (1, 2, 4)
FULL_SCAN = "(d) full scan (no index)"
FLEET_RECORDS = 30 * 86400 * 100_000  # 30 days × 100k lines/s
NODES = (1, 10, 100)
WORKERS_PER_NODE = 8


def timed(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def load() -> str:
    return "load average " + ", ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small cached corpus (smoke run)")
    parser.add_argument("--runs", type=int, help="timed runs per engine and shape (default 3, quick 1)")
    args = parser.parse_args()
    rows, days = (60_000, 3) if args.quick else (10_000_000, 30)
    runs = args.runs or (1 if args.quick else 3)

    base = build_corpus(rows, days, jsonl=False)
    specs = {name: shape["spec"] for name, shape in query_shapes(base, days).items()}
    specs[FULL_SCAN] = QuerySpec(contains="cuda OUT of MEMORY", ignore_case=True)
    local = open_source(archive=str(base / "archive"))
    files = len(local.list_files())
    load_before = load()

    answers = {name: engine.read(local, spec) for name, spec in specs.items()}  # also warms the page cache
    seconds: dict[str, dict[str, float]] = {name: {"local": timed(lambda spec=spec: engine.read(local, spec), runs)}
                                            for name, spec in specs.items()}
    agree = True
    with running_ray_cluster(nodes=2, cpus_per_node=2) as cluster:
        os.environ.update(cluster.env)  # this process is the driver: the cluster's token settings
        distributed = open_source(archive=str(base / "archive"))
        runner = distributed.runner = RayRunner(cluster.address)
        started = time.perf_counter()
        runner.connect()
        connect = time.perf_counter() - started
        for workers in WORKERS:
            runner.in_flight = workers
            for name, spec in specs.items():
                first = engine.read(distributed, spec)  # starts this many workers; builds missing indexes
                agree &= first.equals(answers[name])
                seconds[name][f"ray {workers}"] = timed(lambda spec=spec: engine.read(distributed, spec), runs)
        tasks, nodes = runner.tasks, len(runner.nodes)
    load_after = load()

    columns = ["local", *(f"ray {w}" for w in WORKERS)]
    print(f"\nquery benchmark, local engine vs --engine ray: {rows:,} records over {days} days in {files} files; "
          f"median of {runs} run(s); Ray: 2 nodes × 2 CPUs on this machine, connect {connect:.2f}s (not in the "
          f"figures), {tasks} tasks ran on {nodes} nodes\nmachine: {os.cpu_count()} cores, {load_before} before, "
          f"{load_after} after (shared with other work: figures are indicative)\n")
    header = f"| {'query':26s} | " + " | ".join(f"{c:>9s}" for c in columns) + " | rows | ray 4 time / local |"
    print(header)
    print("|" + "|".join("-" * len(part) for part in header.split("|")[1:-1]) + "|")
    for name, row in seconds.items():
        cells = " | ".join(f"{row[c]:>8.3f}s" for c in columns)
        print(f"| {name:26s} | {cells} | {answers[name].num_rows:>4d} | {row['ray 4'] / row['local']:>17.1f}x |")

    full = seconds[FULL_SCAN]
    print(f"\nper-file cost of {FULL_SCAN} (every file decoded: msg + exc of every row)")
    print(f"| {'engine':18s} | {'wall':>8s} | {'s/file/worker':>13s} | {'records/s/worker':>16s} |")
    print(f"|{'-' * 20}|{'-' * 10}|{'-' * 15}|{'-' * 18}|")
    per_worker: dict[str, float] = {}
    for column in columns:
        workers = 1 if column == "local" else int(column.split()[1])
        label = "local (1 process)" if column == "local" else f"ray, {workers} worker{'s' if workers > 1 else ''}"
        per_worker[column] = rows / (full[column] * workers)
        print(f"| {label:18s} | {full[column]:>7.3f}s | {full[column] * workers / files:>12.4f}s | "
              f"{per_worker[column]:>16,.0f} |")

    rate = per_worker["ray 1"]  # one worker per CPU, uncontended: what a worker of a real node does
    bytes_per_record = sum(f.size for f in local.list_files()) / rows
    print(f"\nprojection: a full scan of 30 days × 100k lines/s = {FLEET_RECORDS:.3g} records "
          f"({FLEET_RECORDS * bytes_per_record / 1e12:.1f} TB at this archive's {bytes_per_record:.1f} B/record)")
    print(f"| {'nodes':>5s} | {'workers':>7s} | {'projected':>10s} | {'read per node':>13s} |")
    print(f"|{'-' * 7}|{'-' * 9}|{'-' * 12}|{'-' * 15}|")
    for nodes_count in NODES:
        workers = nodes_count * WORKERS_PER_NODE
        hours = FLEET_RECORDS / (rate * workers) / 3600
        per_node = rate * WORKERS_PER_NODE * bytes_per_record / 1e6
        print(f"| {nodes_count:>5d} | {workers:>7d} | {hours:>9.2f}h | {per_node:>9.0f} MB/s |")
    print(f"assumptions: {WORKERS_PER_NODE} CPUs per node lent to the scan, each scanning at the measured 1-worker "
          f"Ray rate ({rate:,.0f} records/s, this machine's core); linear scaling — tasks are independent and "
          "the object store serves every node the bandwidth in the last column; the driver merges only "
          "matching rows (a selective search, not an export); task scheduling overhead is in the measured rate.")

    print()
    print(f"{'PASS' if agree else 'FAIL'} answers: --engine ray with 1, 2 and 4 workers returned the local engine's "
          "tables (same rows, same order) for every shape")
    speedup = full["local"] / full["ray 2"]
    print(f"INFO {FULL_SCAN}: ray with 2 workers {full['ray 2']:.3f}s vs local {full['local']:.3f}s ({speedup:.2f}x). "
          f"This machine has {os.cpu_count()} cores shared with other work: Ray adds no hardware here, so a gain "
          "over the local engine comes from taking a larger share of a loaded machine (more processes) or from "
          "process- instead of thread-parallelism, not from scale; what scales is adding nodes (projection above)")
    if args.quick:
        print("(quick run: tiny corpus, figures not meaningful)")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
