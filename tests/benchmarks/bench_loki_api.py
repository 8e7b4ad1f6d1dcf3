"""Loki API benchmark: the archive's ``/loki/api/v1/query_range`` vs ``ranklog query`` on the same archive.

    python tests/benchmarks/bench_loki_api.py [--quick] [--rows N --days D] [--runs N]

The archive is bench_query.py's (same generator, same cache under ``.cache/bench-query/``: 10M records
over 30 days; --quick 60k over 3 days), and so are the three query shapes, written as the LogQL a
Grafana panel sends:

  (a) ``{host="gpu-node-003", level=~"ERROR|CRITICAL"}`` over a two-hour window;
  (b) ``{trace_id="…"}`` over all days;
  (c) ``{job=~".*"} |~ `<the NCCL watchdog regex>` `` over all days.

Engines: the Loki API over real HTTP (a uvicorn process serving the archive's read routes over the
root, tests/helpers/query_server.py; the client measures the whole request, JSON included), the
``ranklog query`` CLI (wall time of a fresh process writing NDJSON, as bench_query times it), and
the engine in-process reading the columns a Loki answer needs. Both sides return the oldest 5000
matches at most (Loki's ``max_entries_limit_per_query``; ``direction=forward`` / ``--limit 5000``)
and must agree on the count. The query indexes are built once before timing (bench_query reports
their cold builds). Target: the Loki API within 1.5x of ``ranklog query``.
"""

from __future__ import annotations

import argparse
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "exporters"), str(REPO)]

import httpx  # noqa: E402

from ranklog.archive.loki import evaluate  # noqa: E402
from ranklog.query import engine  # noqa: E402
from ranklog.query.logql import parse  # noqa: E402
from ranklog.query.logql.spec import to_spec  # noqa: E402
from ranklog.query.sources import open_source  # noqa: E402
from tests.benchmarks.bench_query import DAY_NS, REGEX, START_NS, _iso, _pick_trace, build_corpus, median_time  # noqa: E402
from tests.helpers.query_server import running_query_server  # noqa: E402

LIMIT = 5000
IN_PROCESS = "engine, Loki's columns"
TARGET = 1.5


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small cached corpus (smoke run)")
    parser.add_argument("--rows", type=int, help="records in the corpus (default 10M, quick 60k)")
    parser.add_argument("--days", type=int, help="days the corpus spans (default 30, quick 3)")
    parser.add_argument("--runs", type=int, help="timed runs per engine (default 5, quick 2)")
    args = parser.parse_args()
    rows, days = (60_000, 3) if args.quick else (10_000_000, 30)
    rows, days = args.rows or rows, args.days or days
    runs = args.runs or (2 if args.quick else 5)

    base = build_corpus(rows, days)
    root = base / "archive"
    archive = open_source(archive=str(root))
    trace = _pick_trace(base, days)
    window_start = START_NS + days // 2 * DAY_NS + 10 * 3600 * 10**9
    window_end = window_start + 2 * 3600 * 10**9
    everything = (START_NS, START_NS + days * DAY_NS)
    host = "gpu-node-003"
    shapes = {
        "(a) window+level+host": (f'{{host="{host}", level=~"ERROR|CRITICAL"}}', (window_start, window_end),
                                  ["--start", _iso(window_start), "--end", _iso(window_end), "--level", "ERROR",
                                   "--host", host]),
        "(b) trace-id lookup": (f'{{trace_id="{trace}"}}', everything, ["--trace-id", trace]),
        "(c) regex message search": (f'{{job=~".*"}} |~ `{REGEX}`', everything, ["--regex", REGEX]),
    }
    for expr, (start, end), _ in shapes.values():  # build the trace and severe-rows indexes once
        engine.count(archive, to_spec(parse(expr), start, end))

    results: dict[str, dict[str, tuple[float, int]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        token = Path(tmp) / "token"
        token.write_text(secrets.token_hex(16) + "\n")
        with running_query_server(root, token, Path(tmp) / "server.log") as url, \
                httpx.Client(base_url=url, timeout=600, headers={"Authorization": f"Bearer {token.read_text().strip()}"}) \
                as client:
            for name, (expr, (start, end), flags) in shapes.items():
                def loki(expr=expr, start=start, end=end) -> int:
                    answer = client.get("/loki/api/v1/query_range", params={
                        "query": expr, "start": start, "end": end, "limit": LIMIT, "direction": "forward"})
                    answer.raise_for_status()
                    return sum(len(stream["values"]) for stream in answer.json()["data"]["result"])

                def cli(flags=flags) -> int:
                    with tempfile.TemporaryFile() as out:
                        subprocess.run([sys.executable, "-m", "ranklog", "query", "--archive", str(root), *flags,
                                        "--limit", str(LIMIT), "--format", "ndjson"], stdout=out, check=True, cwd=REPO)
                        out.seek(0)
                        return out.read().count(b"\n")

                def in_process(expr=expr, start=start, end=end) -> int:
                    spec = to_spec(parse(expr), start, end, order=("ts",), limit=LIMIT)
                    return engine.read(archive, spec, evaluate.LINE_COLUMNS).num_rows

                loki()  # warm the server process (imports, first file opens)
                results[name] = {"Loki API (HTTP)": median_time(loki, runs), "ranklog query CLI": median_time(cli, runs),
                                 IN_PROCESS: median_time(in_process, runs)}

    columns = ["Loki API (HTTP)", "ranklog query CLI", IN_PROCESS]
    print(f"\nLoki API benchmark: {rows:,} records over {days} days (bench_query's corpus); median of {runs} runs; "
          f"at most {LIMIT} lines per answer")
    print()
    header = f"| {'query':26s} | " + " | ".join(f"{c:>22s}" for c in columns) + " | rows | Loki / CLI |"
    print(header)
    print("|" + "|".join("-" * len(part) for part in header.split("|")[1:-1]) + "|")
    verdicts = []
    for name, row in results.items():
        counts = {engine_name: count for engine_name, (_, count) in row.items()}
        ratio = row["Loki API (HTTP)"][0] / row["ranklog query CLI"][0]
        cells = " | ".join(f"{row[c][0]:>21.3f}s" for c in columns)
        agree = len(set(counts.values())) == 1
        print(f"| {name:26s} | {cells} | {row['ranklog query CLI'][1]:>4d} | {ratio:>9.2f}x |"
              + ("" if agree else f"  counts differ: {counts}"))
        if not agree:
            verdicts.append(f"FAIL {name}: the Loki API and ranklog query disagree {counts}")
        verdicts.append(f"{'PASS' if ratio <= TARGET else 'FAIL'} {name}: Loki API {row['Loki API (HTTP)'][0]:.3f}s vs "
                        f"ranklog query {row['ranklog query CLI'][0]:.3f}s ({ratio:.2f}x; target <= {TARGET}x); "
                        f"in-process engine {row[IN_PROCESS][0]:.3f}s")
    print()
    for line in verdicts:
        print(line)
    if args.quick:
        print("(quick run: tiny corpus, figures not meaningful)")
    return 0


if __name__ == "__main__":
    started = time.monotonic()
    code = main()
    print(f"(ran {time.monotonic() - started:.0f}s)")
    sys.exit(code)
