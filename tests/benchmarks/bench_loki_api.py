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

A second table times what Grafana and Logs Drilldown send beyond log searches (issue 43), each beside
the ``ranklog`` command that answers the same question: the health check; ``index/volume`` and
``index/volume_range`` over all days (from the volume index) and ``detected_labels`` beside
``ranklog stats``; the volume histogram ``sum by (level) (count_over_time(…[1h]))`` over all days
beside ``ranklog stats`` (their level counts must agree); ``patterns`` and ``detected_fields`` of a
host's hour, a label filter on structured metadata and an ``unwrap`` panel over two hours, beside
``ranklog query`` exporting the same records. The volume index's cold build is reported apart.
Target: volume over all days well under a second.
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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
VOLUME_TARGET_S = 1.0


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
    drilldown_table(root, days, runs, host, window_start, window_end)
    if args.quick:
        print("(quick run: tiny corpus, figures not meaningful)")
    return 0


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ranklog", *args], capture_output=True, text=True, check=True, cwd=REPO)


def drilldown_table(root: Path, days: int, runs: int, host: str, window_start: int, window_end: int) -> None:
    """Grafana's and Logs Drilldown's other requests, each beside the ranklog command for the same question."""
    from ranklog.query import volume_index

    everything = (START_NS, START_NS + days * DAY_NS)
    hour = (window_start, window_start + 3600 * 10**9)
    span = ["--start", _iso(everything[0]), "--end", _iso(everything[1])]
    archive = open_source(archive=str(root))

    def no_partial_hours(low: int, high: int) -> None:
        raise AssertionError("the corpus spans whole days")

    shutil.rmtree(root / "_ranklog_index" / "volume", ignore_errors=True)
    started = time.perf_counter()
    volume_index.volumes(archive, *everything, None, no_partial_hours)  # the volume index, built cold
    cold = time.perf_counter() - started
    stats_json: dict = {}

    def stats() -> int:
        stats_json.update(json.loads(_cli("stats", "--archive", str(root), *span, "--json").stdout))
        return 1

    def export(start: int, end: int, *flags: str) -> int:
        out = _cli("query", "--archive", str(root), "--start", _iso(start), "--end", _iso(end), "--host", host, *flags,
                   "--format", "ndjson").stdout
        return out.count("\n")

    rows: list[tuple[str, str, dict, Callable[[], int] | None]] = [
        ("health check vector(1)+vector(1)", "query", {"query": "vector(1)+vector(1)", "time": 4 * 10**9}, None),
        (f"index/volume, {days} days", "index/volume",
         {"query": '{service_name=~".+"}', "limit": 5000, "start": everything[0], "end": everything[1]}, stats),
        (f"index/volume_range, {days} days, 1d", "index/volume_range",
         {"query": '{service_name=~".+"}', "step": "1d", "start": everything[0], "end": everything[1]}, stats),
        (f"detected_labels, {days} days", "detected_labels",
         {"query": "", "start": everything[0], "end": everything[1]}, stats),
        (f"sum by (level) (count_over_time [1h]), {days} d", "query_range",
         {"query": 'sum by (level) (count_over_time({job=~".+"}[1h]))', "step": "1h", "start": everything[0],
          "end": everything[1]}, stats),
        ("patterns, a host's hour", "patterns",
         {"query": f'{{host="{host}"}}', "step": "60s", "start": hour[0], "end": hour[1]},
         lambda: export(*hour, "--limit", "1000000")),
        ("detected_fields, a host's hour", "detected_fields",
         {"query": f'{{host="{host}"}} | json | logfmt | drop __error__, __error_details__', "start": hour[0],
          "end": hour[1]}, lambda: export(*hour, "--limit", "1000")),
        ("| step > N (metadata), 2 h", "query_range",
         {"query": f'{{host="{host}"}} | step > 100', "limit": LIMIT, "start": window_start, "end": window_end,
          "direction": "forward"}, lambda: export(window_start, window_end, "--step-min", "101", "--limit", str(LIMIT))),
        ("avg_over_time(| unwrap) by (rank), 2 h", "query_range",
         {"query": f'avg_over_time({{host="{host}"}} | unwrap kv_cache_usage [5m]) by (rank)', "step": "5m",
          "start": window_start, "end": window_end}, lambda: export(window_start, window_end, "--attr", "kv_cache_usage")),
    ]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        token = Path(tmp) / "token"
        token.write_text(secrets.token_hex(16) + "\n")
        with running_query_server(root, token, Path(tmp) / "server.log") as url, \
                httpx.Client(base_url=url, timeout=600, headers={"Authorization": f"Bearer {token.read_text().strip()}",
                                                                 "X-Loki-Response-Encoding-Flags": "categorize-labels"}) \
                as client:
            answers: dict[str, dict] = {}

            for name, path, params, peer in rows:
                def loki(path=path, params=params, name=name) -> int:
                    answer = client.get(f"/loki/api/v1/{path}", params=params)
                    answer.raise_for_status()
                    answers[name] = answer.json()
                    return 1

                loki()  # warm
                api = median_time(loki, runs)[0]
                cli = median_time(peer, runs)[0] if peer is not None else None
                results.append((name, api, cli))
            levels = {s["metric"]["level"]: sum(int(v) for _, v in s["values"])
                      for s in answers[rows[4][0]]["data"]["result"]}
    print(f"\nGrafana and Logs Drilldown endpoints: median of {runs} runs; the volume index built cold in {cold:.2f}s")
    print()
    header = f"| {'request':44s} | {'Loki API (HTTP)':>16s} | {'ranklog peer':>13s} | {'peer':26s} |"
    print(header)
    print("|" + "|".join("-" * len(part) for part in header.split("|")[1:-1]) + "|")
    for name, api, cli in results:
        peer = "—" if cli is None else ("ranklog stats" if "days" in name or " d" in name else "ranklog query export")
        cells = f"{api:>15.3f}s | " + (f"{cli:>12.3f}s" if cli is not None else f"{'—':>13s}")
        print(f"| {name:44s} | {cells} | {peer:26s} |")
    print()
    by_level = {row["level"]: row["records"] for row in stats_json["by_level"]}
    agree = by_level == levels
    print(f"{'PASS' if agree else 'FAIL'} level counts: Loki volume histogram {sum(levels.values()):,} records"
          + ("" if agree else f" vs ranklog stats {by_level}"))
    volume = next(api for name, api, _ in results if name.startswith("index/volume,"))
    print(f"{'PASS' if volume < VOLUME_TARGET_S else 'FAIL'} index/volume over {days} days: {volume:.3f}s "
          f"(target < {VOLUME_TARGET_S}s)")


if __name__ == "__main__":
    started = time.monotonic()
    code = main()
    print(f"(ran {time.monotonic() - started:.0f}s)")
    sys.exit(code)
