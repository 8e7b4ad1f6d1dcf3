"""Dedup index benchmark: memory and speed of the archive's exactly-once index (issue 20, item 3).

    python tests/benchmarks/bench_dedup.py [--quick] [--runs K]

Drives ``ranklog.archive.dedup.DedupIndex`` the way the archive does, in process (no HTTP, no WAL):
a fleet of agent files each shipped as consecutive 64k-row requests of 1,000-record chunks (lines of
~120 bytes), then every request re-sent once (what a failover does), then a keyed client without
spans (NDJSON with its own offsets, every other line: gaps). Prints the median time to apply one
64k-row request, the ranges held after each phase and their bytes (24 per range), and the size of
the snapshot the archive writes.

To compare two versions side by side, run it in a checkout of each (``git worktree add``) with
``PYTHONPATH=<checkout>/exporters``; the index's API (``apply(table, now[, spans])``) is what both
take, and spans are passed only when the version accepts them.
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "exporters") not in sys.path:
    sys.path.append(str(REPO / "exporters"))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from ranklog.archive.dedup import DedupIndex  # noqa: E402

LINE = 120
CHUNK = 1000
REQUEST = 64 * 1024


def _requests(files: int, per_file: int):
    """(table, spans) of each request: chunks of files round-robin, every chunk whole."""
    chunks = [(f"node{f % 64}:dev:{f}:head", c) for c in range(per_file // CHUNK) for f in range(files)]
    out, rows, spans = [], [], []
    for source, c in chunks:
        start = c * CHUNK * LINE
        rows.append((source, start + np.arange(CHUNK, dtype=np.int64) * LINE))
        spans.append((source, start, start + CHUNK * LINE))
        if len(rows) * CHUNK >= REQUEST:
            out.append(_table(rows, spans))
            rows, spans = [], []
    if rows:
        out.append(_table(rows, spans))
    return out


def _table(rows, spans):
    sources = np.concatenate([np.full(len(offs), i) for i, (_, offs) in enumerate(rows)])
    names = pa.array([s for s, _ in rows])
    table = pa.table({"source_id": names.take(pa.array(sources)), "offset": pa.array(np.concatenate([o for _, o in rows]))})
    declared: dict[str, list[tuple[int, int]]] = {}
    for source, lo, hi in spans:
        declared.setdefault(source, []).append((lo, hi))
    return table, declared


def _apply(index, table, spans, takes_spans: bool):
    return index.apply(table, 1.0, spans) if takes_spans else index.apply(table, 1.0)


def run(files: int, per_file: int) -> dict[str, float]:
    takes_spans = "spans" in inspect.signature(DedupIndex.apply).parameters
    requests = _requests(files, per_file)
    index = DedupIndex()
    times = []
    for table, spans in requests:
        started = time.perf_counter()
        _apply(index, table, spans, takes_spans)
        times.append(time.perf_counter() - started)
    after_ship = index.range_count()
    resend = []
    for table, spans in requests:
        started = time.perf_counter()
        keep = _apply(index, table, spans, takes_spans)
        resend.append(time.perf_counter() - started)
        assert not keep.any()
    sparse, offs = [], np.arange(0, REQUEST * 2, 2, dtype=np.int64) * LINE
    for n in range(4):
        table = pa.table({"source_id": pa.array([f"client:{n}"] * len(offs)), "offset": pa.array(offs)})
        started = time.perf_counter()
        index.apply(table, 1.0)
        sparse.append(time.perf_counter() - started)
    snapshot = index.snapshot()
    return {"records": sum(t.num_rows for t, _ in requests), "ship_ms": statistics.median(times) * 1e3,
            "resend_ms": statistics.median(resend) * 1e3, "sparse_ms": statistics.median(sparse) * 1e3,
            "ranges_ship": after_ship, "ranges_all": index.range_count(), "snapshot_bytes": snapshot.nbytes,
            "spans": takes_spans}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    files, per_file = (64, 20_000) if args.quick else (256, 50_000)
    results = [run(files, per_file) for _ in range(args.runs)]
    med = {k: statistics.median(r[k] for r in results) for k in results[0]}
    print(f"dedup index, {files} agent files × {per_file:,} records ({med['records']:,.0f} records, 64k-row "
          f"requests of 1,000-record chunks), declared spans: {results[0]['spans']}; medians of {args.runs} runs")
    rows = [
        ("apply one 64k-row request (ms)", f"{med['ship_ms']:.2f}"),
        ("apply one re-sent 64k-row request (ms)", f"{med['resend_ms']:.2f}"),
        ("apply 64k keyed records with gaps, no spans (ms)", f"{med['sparse_ms']:.2f}"),
        ("ranges after the fleet shipped", f"{med['ranges_ship']:,.0f} ({med['ranges_ship'] * 24:,.0f} B)"),
        ("ranges after 4×64k gappy keyed records too", f"{med['ranges_all']:,.0f} ({med['ranges_all'] * 24:,.0f} B)"),
        ("snapshot table (bytes)", f"{med['snapshot_bytes']:,.0f}"),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"{'measure':<{width}} | {'median':>24}")
    print(f"{'-' * width}-+-{'-' * 24}")
    for name, value in rows:
        print(f"{name:<{width}} | {value:>24}")
    # The memory claim of exact dedup: agents declare their chunks' spans, so a fleet that shipped
    # every file completely leaves one range per file, as the old range index did.
    compact = med["ranges_ship"] <= files
    print(f"{'PASS' if compact else 'FAIL'} target: the agents' keys fold to one range per file "
          f"({med['ranges_ship']:,.0f} ranges for {files} files)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
