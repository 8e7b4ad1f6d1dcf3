"""``ranklog stats``: the log-traffic distribution — records per node, level, rank and over time.

One streaming pass: the engine's batches (four columns) feed DuckDB, which aggregates all four
groupings at once (``GROUPING SETS``), so memory stays flat however large the selection. Each row of
the per-node and per-rank tables also counts ERROR+CRITICAL records. Over time, the bucket is chosen
so that the range shows as at most :data:`MAX_BUCKETS` rows (1m, 5m, 15m, 1h, 6h or 1d) unless
``--bucket`` is given.
"""

from __future__ import annotations

from typing import Any

from ..record import LEVELS, format_ts
from . import engine
from .filters import QuerySpec

COLUMNS = ["ts", "host", "level", "rank"]
BASE_BUCKET_S = 60
NICE_BUCKETS_S = (60, 300, 900, 3600, 6 * 3600, 86400, 7 * 86400)
MAX_BUCKETS = 48

_SQL = f"""
SELECT host, level, rank, time_bucket_s,
       GROUPING(host) = 0 AS by_host, GROUPING(level) = 0 AS by_level, GROUPING(rank) = 0 AS by_rank,
       GROUPING(time_bucket_s) = 0 AS by_time,
       count(*) AS records, count_if(level IN ('ERROR', 'CRITICAL')) AS errors
FROM (SELECT host, level, rank, (epoch_ns(ts) // {BASE_BUCKET_S * 10**9})::BIGINT * {BASE_BUCKET_S} AS time_bucket_s
      FROM records)
GROUP BY GROUPING SETS ((host), (level), (rank), (time_bucket_s))
"""


def _bucket_for(span_s: float, wanted: float | None) -> int:
    if wanted:
        return max(BASE_BUCKET_S, int(wanted) // BASE_BUCKET_S * BASE_BUCKET_S)
    for size in NICE_BUCKETS_S:
        if span_s / size <= MAX_BUCKETS:
            return size
    return NICE_BUCKETS_S[-1]


def compute_stats(source: Any, spec: QuerySpec, bucket_s: float | None = None) -> dict[str, Any]:
    """Counts per host, level, rank and time bucket as a JSON-ready dict."""
    with engine.duckdb_over(source, spec, COLUMNS) as connection:
        rows = connection.execute(_SQL).fetchall()
    by_host, by_level, by_rank, by_time = [], {}, [], {}
    for host, level, rank, bucket, is_host, is_level, is_rank, is_time, records, errors in rows:
        if is_host:
            by_host.append({"host": host, "records": records, "errors": errors})
        elif is_level:
            by_level[level] = records
        elif is_rank:
            by_rank.append({"rank": rank, "records": records, "errors": errors})
        elif is_time:
            by_time[bucket] = records
    total = sum(by_level.values())
    size = _bucket_for((max(by_time) - min(by_time)) if by_time else 0, bucket_s)
    coarse: dict[int, int] = {}
    for bucket, records in by_time.items():
        start = bucket // size * size
        coarse[start] = coarse.get(start, 0) + records
    if coarse:
        for start in range(min(coarse), max(coarse) + 1, size):
            coarse.setdefault(start, 0)

    def share(n: int) -> float:
        return round(n / total, 6) if total else 0.0

    return {
        "total": total,
        "by_host": sorted(({**h, "share": share(h["records"])} for h in by_host), key=lambda h: -h["records"]),
        "by_level": [{"level": name, "records": by_level[name], "share": share(by_level[name])}
                     for name in LEVELS if name in by_level],
        "by_rank": sorted(({**r, "share": share(r["records"])} for r in by_rank),
                          key=lambda r: (r["rank"] is None, r["rank"] if r["rank"] is not None else 0)),
        "bucket_seconds": size,
        "over_time": [{"start": format_ts(start * 10**9), "records": coarse[start]} for start in sorted(coarse)],
    }


def render_stats(stats: dict[str, Any], max_rows: int = 64) -> None:
    """Print the four distributions as rich tables (bars scale to the largest row)."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"[bold]{stats['total']}[/] records")
    if not stats["total"]:
        return

    def table(title: str, key: str, rows: list[dict[str, Any]], with_errors: bool) -> None:
        out = Table(title=title, header_style="bold", title_justify="left")
        out.add_column(key)
        out.add_column("records", justify="right")
        out.add_column("share", justify="right")
        if with_errors:
            out.add_column("errors", justify="right")
        out.add_column("")
        top = max((row["records"] for row in rows), default=1) or 1
        for row in rows[:max_rows]:
            bar = "█" * max(1 if row["records"] else 0, round(30 * row["records"] / top))
            cells = [str(row[key]) if row[key] is not None else "-", str(row["records"]),
                     f"{100 * row.get('share', row['records'] / stats['total']):.1f}%"]
            if with_errors:
                cells.append(str(row["errors"]))
            out.add_row(*cells, bar)
        if len(rows) > max_rows:
            out.caption = f"{len(rows) - max_rows} more (use --json for all)"
        console.print(out)

    table("per level", "level", stats["by_level"], False)
    table("per node", "host", stats["by_host"], True)
    table("per rank", "rank", stats["by_rank"], True)
    table(f"over time ({stats['bucket_seconds']}s buckets)", "start", stats["over_time"], False)


_DISTRIBUTIONS = (("level", "by_level"), ("host", "by_host"), ("rank", "by_rank"), ("start", "over_time"))
STATS_COLUMNS = ["distribution", "key", "records", "share", "errors"]


def stats_rows(stats: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """The four distributions as one CSV (``--format csv``): distribution, key, records, share, errors."""
    rows = [{"distribution": name if name != "start" else "time", "key": row[name], "records": row["records"],
             "share": row.get("share"), "errors": row.get("errors")}
            for name, key in _DISTRIBUTIONS for row in stats[key]]
    return STATS_COLUMNS, rows


def stats_lines(stats: dict[str, Any]) -> list[str]:
    """The distributions as plain text (``--format raw``), every row (nothing cut)."""
    lines = [f"{stats['total']} records"]
    for row in stats_rows(stats)[1]:
        share = f" {100 * row['share']:.1f}%" if row["share"] is not None else ""
        errors = f" errors={row['errors']}" if row["errors"] is not None else ""
        lines.append(f"{row['distribution']} {row['key'] if row['key'] is not None else '-'} {row['records']}{share}{errors}")
    return lines
