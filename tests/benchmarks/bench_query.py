"""Query benchmark: ranklog over its Parquet archive vs DuckDB `read_json` and `grep` over raw JSONL.

    python tests/benchmarks/bench_query.py [--quick] [--runs N]

The corpus (tests/helpers/corpus.py) is generated one simulated day at a time — 10M records over 30
days (--quick: 60k over 3 days) — and stored twice: through the archive's writer (the real hive layout, sort
order and encodings) and as the ranklog logger's raw JSONL. Both are cached under
``.cache/bench-query/<parameters>/``.

Three query shapes, each answered by every engine, whose answers must agree (row counts):
  (a) a two-hour window + level >= ERROR + one host;
  (b) one trace id over all 30 days;
  (c) a regular expression over the messages of all 30 days.
Engines: the ranklog engine in-process (what triage uses; all 20 columns, only ts/host/rank/msg
as a search listing shows them, and `engine.count` — what `grep -c` and the DuckDB peers compute), the `ranklog query` CLI (wall time of a
fresh process writing NDJSON), DuckDB over the archive's Parquet (the alternative path the engine
could take), DuckDB `read_json` over the raw JSONL, and `LC_ALL=C grep -E` over the raw files
(all three shapes can be expressed as a line regex here because the hour-aligned window maps to a
`ts` prefix). Medians of --runs runs (DuckDB/grep over JSONL: fewer, they are slow). The query
indexes (trace ids; the severe rows, ranklog.query.severe_index) are deleted, then built once before
timing: their cold build times and sizes are reported. (c) also prints the floor of a search
without the severe index: pyarrow's own threaded scan of the hourly files' row groups the text
index keeps.

Then the same archive is copied into a bucket of a SeaweedFS server started on this machine and the
cold index builds and the three shapes are timed again through ``s3://``, side by side with local disk.

Targets: (a) and (b) under 0.5 s and >= 20x faster than DuckDB over JSONL; (c) faster than grep.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "exporters"), str(REPO)]

import duckdb  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.dataset as ds  # noqa: E402
import pyarrow.fs as pafs  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from ranklog import text_index  # noqa: E402
from ranklog.archive import parquet_writer as writer  # noqa: E402
from ranklog.archive_layout import INDEX_ROOT  # noqa: E402
from ranklog.query import engine  # noqa: E402
from ranklog.query.filters import QuerySpec  # noqa: E402
from ranklog.query.sources import open_source  # noqa: E402
from ranklog.query.text_search import _indexed_out, search_literals  # noqa: E402
from ranklog.record import arrow_schema  # noqa: E402
from tests.helpers.corpus import generate, write_jsonl  # noqa: E402
from tests.helpers.query_data import write_archive  # noqa: E402

DAY_NS = 86400 * 10**9
START_NS = 1_764_547_200 * 10**9  # 2025-12-01T00:00:00Z
HOSTS, RANKS_PER_HOST = 16, 8
SEARCH_COLUMNS = ["ts", "host", "rank", "msg"]  # what a search shows; the engine reads only what is asked
REGEX = r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=[0-9]+, OpType=ALLGATHER"


def build_corpus(rows: int, days: int, jsonl: bool = True) -> Path:
    """Generate (or reuse) the archive + raw JSONL for `rows` records over `days` days (`jsonl`=False:
    the archive alone, cached apart, for benchmarks that read only the archive)."""
    # The archive's layout is the writer's: a change to it (or to the text index) rebuilds the cache.
    layout = hashlib.sha1(b"".join(Path(module.__file__).read_bytes() for module in (writer, text_index)))
    base = REPO / ".cache" / "bench-query" / (f"rows{rows}-days{days}-hosts{HOSTS}x{RANKS_PER_HOST}-"
                                              f"{layout.hexdigest()[:10]}{'' if jsonl else '-archive-only'}")
    if not jsonl and not (base / "DONE").exists() and (base.with_name(base.name.removesuffix("-archive-only"))
                                                       / "DONE").exists():
        return base.with_name(base.name.removesuffix("-archive-only"))
    if (base / "DONE").exists():
        return base
    if base.exists():
        shutil.rmtree(base)
    started = time.monotonic()
    per_day = rows // days
    for day in range(days):
        table = generate(per_day, start_ns=START_NS + day * DAY_NS, span_s=86400, hosts=HOSTS,
                         ranks_per_host=RANKS_PER_HOST, seed=1000 + day)
        write_archive(table, base / "archive", archive_id="bench")
        if jsonl:
            write_jsonl(table, base / "jsonl" / f"day-{day:02d}")
        print(f"  generated day {day + 1}/{days} ({per_day} records, {time.monotonic() - started:.0f}s)",
              file=sys.stderr, flush=True)
    (base / "DONE").write_text("ok\n")
    return base


def _total(path: Path) -> int:
    """Bytes of the visible files under `path` (not the query indexes under ``_ranklog_index``)."""
    return sum(p.stat().st_size for p in path.rglob("*")
               if p.is_file() and not any(part.startswith((".", "_")) for part in p.relative_to(path).parts))


def _pick_trace(base: Path, days: int) -> str:
    """A trace id from the middle of the corpus (read back from the archive, like a user would have it)."""
    source = open_source(archive=str(base / "archive"))
    middle = START_NS + days // 2 * DAY_NS
    files = source.list_files(middle, middle + DAY_NS)
    table = pa.parquet.read_table(files[len(files) // 2].path, columns=["trace_id"])
    return pc.drop_null(table["trace_id"])[0].as_py()


def _iso(ns: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 10**9))


def _total_index(path: Path) -> int:
    return sum(p.stat().st_size for p in path.glob("*.parquet"))


def query_shapes(base: Path, days: int) -> dict[str, dict]:
    """The three query shapes over the corpus at `base`: the spec, the CLI flags, the DuckDB WHERE
    clause and the grep pattern of each (shared with bench_query_ray.py)."""
    trace = _pick_trace(base, days)
    window_start = START_NS + days // 2 * DAY_NS + 10 * 3600 * 10**9
    window_end = window_start + 2 * 3600 * 10**9
    host = "gpu-node-003"
    day_prefix = _iso(window_start)[:11]  # e.g. 2025-12-16T
    return {
        "(a) window+level+host": dict(
            spec=QuerySpec(start_ns=window_start, end_ns=window_end, levels=("ERROR", "CRITICAL"), hosts=(host,)),
            cli=["--start", _iso(window_start), "--end", _iso(window_end), "--level", "ERROR", "--host", host],
            where=(f"ts >= '{_iso(window_start)}' AND ts < '{_iso(window_end)}' "
                   f"AND level IN ('ERROR','CRITICAL') AND host = '{host}'"),
            grep=(f'^\\{{"ts":"{day_prefix}(10|11):[^"]*","level":"(ERROR|CRITICAL)".*"host":"{host}"'),
        ),
        "(b) trace-id lookup": dict(
            spec=QuerySpec(trace_ids=(trace,)), cli=["--trace-id", trace], where=f"trace_id = '{trace}'",
            grep=f'"trace_id":"{trace}"',
        ),
        "(c) regex message search": dict(
            spec=QuerySpec(regex=REGEX), cli=["--regex", REGEX],
            where=f"(regexp_matches(msg, '{REGEX}') OR regexp_matches(coalesce(exc, ''), '{REGEX}'))",
            grep=REGEX,
        ),
    }


def median_time(fn: Callable[[], int], runs: int) -> tuple[float, int]:
    times, result = [], None
    for _ in range(runs):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), int(result)


def index_floor(archive, spec: QuerySpec, columns: list[str]) -> int:
    """Rows matching `spec`, read the fastest way pyarrow offers on this layout: its C++ dataset
    scanner (all cores, no GIL, the filter pushed down) over exactly the row groups the text index
    keeps. It is a floor for any engine over these files, ranklog's included: what a search cannot
    skip still has to be opened and decoded. The footers are read here to consult the index."""
    parquet, filesystem = ds.ParquetFileFormat(), pafs.LocalFileSystem()
    literals = search_literals(spec)
    fragments = []
    for data_file in archive.list_files(None, None):
        file = pq.ParquetFile(data_file.path)
        ruled_out = _indexed_out(file, literals)
        kept = [group for group in range(file.metadata.num_row_groups) if group not in ruled_out]
        if kept:
            fragments.append(parquet.make_fragment(data_file.path, filesystem=filesystem, row_groups=kept))
    dataset = ds.FileSystemDataset(fragments, arrow_schema(), parquet, filesystem=filesystem)
    return dataset.to_table(columns=columns, filter=spec.expression()).num_rows


def s3_side_by_side(base: Path, shapes: dict, cold: dict, local: dict, runs: int) -> None:
    """The same archive copied into a bucket of a SeaweedFS server on this machine, queried with the
    ranklog engine through `s3://` (pyarrow's S3 client), next to the local-disk figures above: the
    cold index builds (their index objects land in the bucket) and the three shapes."""
    from ranklog.object_store import S3Settings
    from ranklog.query.sources import ArchiveSource
    from tests.helpers.seaweedfs import running_seaweedfs

    with tempfile.TemporaryDirectory(prefix="bench-query-s3-") as scratch, running_seaweedfs(Path(scratch)) as s3:
        bucket = s3.new_bucket("bench")
        settings = S3Settings(s3.endpoint, s3.region, s3.access_key, s3.secret_key)
        archive = ArchiveSource.open(f"s3://{bucket}/archive", settings)
        started = time.perf_counter()
        pafs.copy_files(str(base / "archive"), f"{bucket}/archive", source_filesystem=pafs.LocalFileSystem(),
                        destination_filesystem=archive.filesystem, use_threads=True)
        upload = time.perf_counter() - started
        for key in s3.keys(bucket, f"archive/{INDEX_ROOT}/"):  # indexes are rebuilt, as on local disk
            s3.client().delete_object(Bucket=bucket, Key=key)
        s3_cold = {}
        for index, shape in (("trace", "(b) trace-id lookup"), ("severe", "(c) regex message search")):
            started = time.perf_counter()
            engine.count(archive, shapes[shape]["spec"])
            s3_cold[index] = time.perf_counter() - started
        print(f"\nlocal disk vs S3 (the same archive in a SeaweedFS bucket on loopback, uploaded in {upload:.1f}s; "
              f"ranklog engine, all columns, median of {runs} runs)")
        print(f"| {'':26s} | {'local disk':>11s} | {'S3':>11s} | {'S3/local':>8s} | rows |")
        print(f"|{'-' * 28}|{'-' * 13}|{'-' * 13}|{'-' * 10}|------|")
        for index in ("trace", "severe"):
            print(f"| {f'cold {index} index build':26s} | {cold[index][0]:>10.3f}s | {s3_cold[index]:>10.3f}s | "
                  f"{s3_cold[index] / cold[index][0]:>7.1f}x |      |")
        for name, shape in shapes.items():
            seconds, rows = median_time(lambda spec=shape["spec"]: engine.read(archive, spec).num_rows, runs)
            ours, local_rows = local[name]["ranklog engine"]
            agree = "" if rows == local_rows else f"  counts differ: S3 {rows} vs local {local_rows}"
            print(f"| {name:26s} | {ours:>10.3f}s | {seconds:>10.3f}s | {seconds / ours:>7.1f}x | {rows:>4d} |{agree}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small cached corpus (smoke run)")
    parser.add_argument("--runs", type=int, help="timed runs per engine (default 5, quick 2)")
    parser.add_argument("--slow-runs", type=int, help="runs of the JSONL peers and the CLI (default 2, quick 1)")
    args = parser.parse_args()
    rows, days = (60_000, 3) if args.quick else (10_000_000, 30)
    runs = args.runs or (2 if args.quick else 5)
    slow_runs = args.slow_runs or (1 if args.quick else 2)

    base = build_corpus(rows, days)
    archive_bytes, jsonl_bytes = _total(base / "archive"), _total(base / "jsonl")
    archive = open_source(archive=str(base / "archive"))
    jsonl_glob = str(base / "jsonl" / "*" / "*" / "*.jsonl")
    shapes = query_shapes(base, days)

    # The query indexes are built by the first query that needs a day: time those builds from scratch.
    shutil.rmtree(base / "archive" / INDEX_ROOT, ignore_errors=True)
    cold = {}
    for index, shape in (("trace", "(b) trace-id lookup"), ("severe", "(c) regex message search")):
        started = time.perf_counter()
        engine.count(archive, shapes[shape]["spec"])
        cold[index] = (time.perf_counter() - started, _total_index(base / "archive" / INDEX_ROOT / index))

    connection = duckdb.connect()
    connection.execute("SET threads TO 2")
    parquet_glob = str(base / "archive" / "date=*" / "hour=*" / "*.parquet")
    results: dict[str, dict[str, tuple[float, int]]] = {}
    floors: dict[str, tuple[tuple[float, int], tuple[float, int]]] = {}
    for name, shape in shapes.items():
        spec = shape["spec"]
        row: dict[str, tuple[float, int]] = {}
        row["ranklog engine"] = median_time(lambda spec=spec: engine.read(archive, spec).num_rows, runs)
        row["ranklog 4 columns"] = median_time(
            lambda spec=spec: engine.read(archive, spec, SEARCH_COLUMNS).num_rows, runs)
        row["ranklog count"] = median_time(lambda spec=spec: engine.count(archive, spec), runs)

        def cli(shape=shape) -> int:
            with tempfile.TemporaryFile() as out:
                subprocess.run([sys.executable, "-m", "ranklog", "query", "--archive", str(base / "archive"),
                                *shape["cli"], "--format", "ndjson"], stdout=out, check=True, cwd=REPO)
                out.seek(0)
                return sum(chunk.count(b"\n") for chunk in iter(lambda: out.read(1 << 20), b""))

        row["ranklog CLI"] = median_time(cli, slow_runs)
        row["duckdb parquet"] = median_time(lambda shape=shape: connection.execute(
            f"SELECT count(*) FROM read_parquet('{parquet_glob}', hive_partitioning=true) "
            f"WHERE {shape['where']}").fetchone()[0], runs)
        row["duckdb read_json"] = median_time(lambda shape=shape: connection.execute(
            f"SELECT count(*) FROM read_json('{jsonl_glob}', format='newline_delimited') "
            f"WHERE {shape['where']}").fetchone()[0], slow_runs)

        def grep(shape=shape) -> int:
            proc = subprocess.run(["grep", "-rcE", shape["grep"], str(base / "jsonl")], capture_output=True,
                                  text=True, env={**os.environ, "LC_ALL": "C"})
            return sum(int(line.rsplit(":", 1)[1]) for line in proc.stdout.splitlines())

        row["grep -E"] = median_time(grep, slow_runs)
        if name.startswith("(c)"):
            floors[name] = (median_time(lambda spec=spec: index_floor(archive, spec, list(arrow_schema().names)), runs),
                            median_time(lambda spec=spec: index_floor(archive, spec, ["msg"]), runs))
        results[name] = row

    columns = ["ranklog engine", "ranklog 4 columns", "ranklog count", "ranklog CLI", "duckdb parquet",
               "duckdb read_json", "grep -E"]
    print(f"\nquery benchmark: {rows:,} records over {days} days, {HOSTS * RANKS_PER_HOST} ranks on {HOSTS} hosts; "
          f"archive {archive_bytes / 2**20:.0f} MiB Parquet, raw {jsonl_bytes / 2**20:.0f} MiB JSONL; "
          f"median of {runs} runs ({slow_runs} for the CLI and JSONL peers)")
    for index, (seconds, size) in cold.items():
        print(f"{index} index (built by the first query that needs it): cold build {seconds:.2f}s, "
              f"{size / 2**20:.1f} MiB = {size / rows:.2f} B/record ({size / archive_bytes:.1%} of the archive)")
    print()
    header = f"| {'query':26s} | " + " | ".join(f"{c:>16s}" for c in columns) + " | rows | vs read_json | vs grep |"
    print(header)
    print("|" + "|".join("-" * (len(part)) for part in header.split("|")[1:-1]) + "|")
    verdicts = []
    for name, row in results.items():
        counts = {engine_name: count for engine_name, (_, count) in row.items()}
        agree = len(set(counts.values())) == 1
        cells = " | ".join(f"{row[c][0]:>15.3f}s" for c in columns)
        ours = row["ranklog engine"][0]
        vs_json = row["duckdb read_json"][0] / ours
        vs_grep = row["grep -E"][0] / ours
        print(f"| {name:26s} | {cells} | {row['ranklog engine'][1]:>4d} | {vs_json:>11.1f}x | {vs_grep:>6.1f}x |"
              + ("" if agree else f"  counts differ: {counts}"))
        if not agree:
            verdicts.append(f"FAIL {name}: engines disagree on the answer {counts}")
        if name.startswith("(c)"):
            search, counted = row["ranklog 4 columns"][0], row["ranklog count"][0]
            verdicts.append(f"{'PASS' if vs_grep > 1 else 'FAIL'} {name}: ranklog {ours:.3f}s vs grep "
                            f"{row['grep -E'][0]:.3f}s ({vs_grep:.1f}x; target: faster than grep); with the "
                            f"search columns only {search:.3f}s ({row['grep -E'][0] / search:.1f}x); counting "
                            f"like grep -c {counted:.3f}s ({row['grep -E'][0] / counted:.1f}x)")
            (whole, whole_rows), (text, text_rows) = floors[name]
            verdicts.append(f"     without the severe index, the floor over the hourly files (pyarrow's threaded "
                            f"scan of only the row groups the text index keeps): all columns {whole:.3f}s, msg "
                            f"only {text:.3f}s, vs grep "
                            f"{row['grep -E'][0]:.3f}s" + ("" if whole_rows == text_rows == row["grep -E"][1]
                                                           else f"  counts differ: {whole_rows} {text_rows}"))
        else:
            ok = ours < 0.5 and vs_json >= 20
            verdicts.append(f"{'PASS' if ok else 'FAIL'} {name}: ranklog {ours:.3f}s (target < 0.5s), "
                            f"{vs_json:.0f}x faster than DuckDB read_json (target >= 20x)")
    print()
    for line in verdicts:
        print(line)
    s3_side_by_side(base, shapes, cold, results, runs)
    if args.quick:
        print("(quick run: tiny corpus, figures not meaningful)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
