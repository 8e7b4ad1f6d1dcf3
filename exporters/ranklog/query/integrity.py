"""``ranklog integrity``: find lost records end to end.

What is checked (over the selected records, e.g. ``--since 1h`` from a systemd timer):

- **seq gaps**: the ranklog logger numbers each process's records 1, 2, 3… (and advances ``seq`` past
  records it had to drop). Records are grouped by process — host, pid, job, rank and the logger's
  file family (the path without its ``.NNNN.jsonl`` part number: a process's parts continue one
  sequence; a logrotate suffix ``.1``, ``.2`` … is the same file renamed) — and walked in write
  order: by file generation (a source_id, ordered by its first record: parts, renamed files and the
  generations copytruncate starts at offset 0 again), then byte offset. A jump ``seq → seq+k``
  means ``k-1`` records are missing. A *drop* back to a lower ``seq`` is a new process that reused the pid (the
  logger restarts at 1) and is counted as a restart, not a gap. The first record of the selection
  is not checked against anything before it (retention, the time window).
- **offset coverage**: a record's end is not stored, so byte-exact coverage cannot be proven from the
  archive; what can be is (a) the file's head was archived — the first offset of every source is 0
  (checked only when the selection has no lower time bound, since a window or retention starts
  mid-file), and (b) offsets are unique per source (a repeat means two different records claim one
  position: a file-identity problem). Record loss inside a file shows as a seq gap for ranklog
  files; for plain text files seq does not exist and a hole is undetectable from stored data.
- **inferred times**: records whose line had no timestamp and took the time of the file's nearest
  timestamped line or its modification time (``attrs.ts_inferred``), per source; informational.
- **agent-reported losses**: bytes the node agent saw in a file but could not ship (a copytruncate
  that truncated lines no copy beside the file holds) arrive as WARNING
  records of that source carrying ``attrs.ranklog_lost_bytes`` and ``ranklog_lost_reason``; they are
  listed by source and fail the check — this is loss no seq number could show for plain-text files.
- **archive WAL losses**: an archive that found damage in its write-ahead log at start, in entries it had
  acknowledged but not yet written to Parquet, stores a loss notice (``attrs.ranklog_wal_lost_entries``,
  ``ranklog_wal_lost_records`` — null when the damaged header did not survive — and
  ``ranklog_wal_lost_bytes``; see ranklog.archive.wal_damage); they are listed and fail the check.
- **unreadable files**: Parquet files of the archive that are not readable (empty, random, cut short):
  queries skip them with a warning; the archive's compaction moves them to ``_ranklog/quarantine/``.
  Both the ones this check met and the ones already moved aside are listed and fail the check — their
  records are not readable (remove a quarantined file once it is dealt with).
- **parse errors**: lines kept as ``text`` records because their format did not parse (``attrs``
  holds ``parse_error``); nothing is lost, so they only fail the check with ``--fail-on-parse-errors``.

Exit status: 0 clean, 1 when records are missing (a seq gap, a missing head, duplicate offsets, an
agent-reported loss, an archive WAL loss).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..archive_layout import WAL_LOST_BYTES, WAL_LOST_ENTRIES, WAL_LOST_RECORDS, WAL_NOTICE_PREFIX
from ..record import format_ts
from . import engine
from .filters import QuerySpec

COLUMNS = ["ts", "host", "pid", "job", "rank", "source", "source_id", "offset", "seq"]
PART_SUFFIX = r"\.\d{4,}\.(jsonl|log)$"
ROTATED_SUFFIX = r"\.\d{1,3}$"  # logrotate's app.log.1, .2 …: the same file, renamed
FAMILY = f"regexp_replace(regexp_replace(source, '{ROTATED_SUFFIX}', ''), '{PART_SUFFIX}', '')"
MAX_LISTED = 1000

_LOAD = "CREATE TABLE r AS SELECT * FROM records"
_GAPS = f"""
WITH s AS (
  SELECT host, pid, job, rank, source, source_id, "offset", seq, epoch_ns(ts) AS ts_ns,
         {FAMILY} AS family,
         min(epoch_ns(ts)) OVER (PARTITION BY source_id) AS generation_ts
  FROM r WHERE seq IS NOT NULL),
w AS (
  SELECT *, lag(seq) OVER p AS prev_seq, lag(ts_ns) OVER p AS prev_ts_ns
  FROM s WINDOW p AS (PARTITION BY host, pid, job, rank, family
                      ORDER BY generation_ts, source_id, "offset"))
SELECT host, pid, job, rank, family, prev_seq, seq, seq - prev_seq - 1 AS missing, prev_ts_ns, ts_ns,
       seq <= prev_seq AS restart
FROM w WHERE prev_seq IS NOT NULL AND seq <> prev_seq + 1
ORDER BY ts_ns, host, pid
"""
_SUMMARY = f"""
SELECT count(*) AS records,
       count(DISTINCT (host, pid, job, rank, {FAMILY}))
           FILTER (WHERE seq IS NOT NULL) AS processes,
       count(DISTINCT source_id) AS sources
FROM r
"""
_SOURCES = f"""
SELECT source_id, any_value(source) AS source, any_value(host) AS host, min("offset") AS first_offset,
       count(*) - count(DISTINCT "offset") AS duplicate_offsets
FROM r WHERE NOT starts_with(source_id, '{WAL_NOTICE_PREFIX}') GROUP BY source_id
HAVING min("offset") > 0 OR count(*) > count(DISTINCT "offset")
ORDER BY host, source
"""


def _marked(source: Any, spec: QuerySpec, attr: str, count_name: str) -> list[dict[str, Any]]:
    """Records whose attrs carry `attr`, counted per (host, source, format)."""
    marked_spec = dataclasses.replace(spec, attrs=(*spec.attrs, attr), order=(), limit=None)
    counts: dict[tuple[str, str, str], int] = {}
    for batch in engine.scan(source, marked_spec, ["host", "source", "format"]):
        for host, path, fmt in zip(*(batch.column(i).to_pylist() for i in range(3)), strict=True):
            counts[(host, path, fmt)] = counts.get((host, path, fmt), 0) + 1
    return [{"host": h, "source": s, "format": f, count_name: n} for (h, s, f), n in sorted(counts.items())]


def _agent_losses(source: Any, spec: QuerySpec) -> list[dict[str, Any]]:
    """Losses the agent recorded (``attrs.ranklog_lost_bytes``), summed by host, source and reason."""
    import json

    losses_spec = dataclasses.replace(spec, attrs=(*spec.attrs, "ranklog_lost_bytes"), order=(), limit=None)
    totals: dict[tuple[str, str, str], list[int]] = {}
    for batch in engine.scan(source, losses_spec, ["host", "source", "attrs"]):
        for host, path, attrs in zip(*(batch.column(i).to_pylist() for i in range(3)), strict=True):
            extra = json.loads(attrs)
            entry = totals.setdefault((host, path, str(extra.get("ranklog_lost_reason", "unknown"))), [0, 0])
            entry[0] += int(extra.get("ranklog_lost_bytes") or 0)
            entry[1] += 1
    return [{"host": h, "source": s, "reason": r, "lost_bytes": b, "events": n}
            for (h, s, r), (b, n) in sorted(totals.items())]


def _wal_losses(source: Any, spec: QuerySpec) -> list[dict[str, Any]]:
    """The archives' WAL loss notices (ranklog.archive.wal_damage), one per damaged region."""
    import json

    notices_spec = dataclasses.replace(spec, attrs=(*spec.attrs, WAL_LOST_ENTRIES), order=(), limit=None)
    found = []
    for batch in engine.scan(source, notices_spec, ["ts", "host", "source", "attrs"]):
        columns = [batch.column(0).cast("int64"), *(batch.column(i) for i in range(1, 4))]
        for ts_us, host, path, attrs in zip(*(column.to_pylist() for column in columns), strict=True):
            extra = json.loads(attrs)
            records = extra.get(WAL_LOST_RECORDS)
            found.append({"archive_id": extra.get("archive_id"), "host": host, "segment": path,
                          "position": extra.get("ranklog_wal_position"), "entries": int(extra.get(WAL_LOST_ENTRIES) or 0),
                          "records": None if records is None else int(records),
                          "bytes": int(extra.get(WAL_LOST_BYTES) or 0), "ts": format_ts(ts_us * 1000)})
    return sorted(found, key=lambda loss: (loss["ts"], str(loss["segment"])))


def check_integrity(source: Any, spec: QuerySpec) -> dict[str, Any]:
    """The integrity report as a JSON-ready dict; ``ok`` is False when records are missing."""
    with engine.duckdb_over(source, spec, COLUMNS) as connection:
        connection.execute(_LOAD)
        records, processes, sources = connection.execute(_SUMMARY).fetchone()
        jumps = connection.execute(_GAPS).fetchall()
        source_rows = connection.execute(_SOURCES).fetchall()
    gaps = [{"host": host, "pid": pid, "job": job, "rank": rank, "file": family, "after_seq": prev, "next_seq": seq,
             "missing": missing, "after_ts": format_ts(prev_ts), "next_ts": format_ts(ts)}
            for host, pid, job, rank, family, prev, seq, missing, prev_ts, ts, restart in jumps if not restart]
    restarts = sum(1 for row in jumps if row[-1])
    check_heads = spec.start_ns is None
    offsets = [{"source_id": sid, "source": path, "host": host, "first_offset": first, "duplicate_offsets": dups,
                "problem": "duplicate offsets" if dups else "file head not archived"}
               for sid, path, host, first, dups in source_rows if dups or (check_heads and first > 0)]
    parse_errors = _marked(source, spec, "parse_error", "errors")
    inferred = _marked(source, spec, "ts_inferred", "records")
    losses = _agent_losses(source, spec)
    wal = _wal_losses(source, spec)
    unreadable = [{"path": path, "problem": why} for path, why in sorted(getattr(source, "unreadable", {}).items())]
    quarantine = getattr(source, "quarantined", None)
    unreadable += [{"path": path, "problem": f"moved aside by the archive (unreadable, {size} bytes)"}
                   for path, size in (quarantine() if quarantine is not None else [])]
    return {
        "ok": not gaps and not offsets and not losses and not wal and not unreadable,
        "records": records, "processes": processes, "sources": sources,
        "missing_records": sum(g["missing"] for g in gaps),
        "seq_gaps": gaps[:MAX_LISTED], "seq_gap_count": len(gaps), "restarts": restarts,
        "offset_problems": offsets[:MAX_LISTED], "offset_problem_count": len(offsets),
        "heads_checked": check_heads,
        "parse_errors": parse_errors, "parse_error_total": sum(p["errors"] for p in parse_errors),
        "inferred_ts": inferred[:MAX_LISTED], "inferred_ts_total": sum(p["records"] for p in inferred),
        "agent_losses": losses[:MAX_LISTED], "agent_lost_bytes": sum(entry["lost_bytes"] for entry in losses),
        "archive_wal_losses": wal[:MAX_LISTED], "archive_wal_lost_entries": sum(loss["entries"] for loss in wal),
        "archive_wal_lost_records": sum(loss["records"] or 0 for loss in wal),
        "archive_wal_records_unknown": sum(1 for loss in wal if loss["records"] is None),
        "unreadable_files": unreadable[:MAX_LISTED], "unreadable_file_count": len(unreadable),
    }


def render_integrity(report: dict[str, Any], max_rows: int = 50) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    verdict, rest = integrity_summary(report).split(":", 1)
    console.print(f"[bold {'green' if report['ok'] else 'red'}]{verdict}[/]:{rest}", highlight=False)
    if report["seq_gaps"]:
        table = Table(title="seq gaps", header_style="bold", title_justify="left")
        for name in ("host", "pid", "rank", "file", "after seq", "next seq", "missing", "between"):
            table.add_column(name, overflow="fold")
        for gap in report["seq_gaps"][:max_rows]:
            table.add_row(gap["host"], str(gap["pid"]), str(gap["rank"]), gap["file"], str(gap["after_seq"]),
                          str(gap["next_seq"]), str(gap["missing"]), f"{gap['after_ts']} … {gap['next_ts']}")
        console.print(table)
    if report["offset_problems"]:
        table = Table(title="offset coverage", header_style="bold", title_justify="left")
        for name in ("host", "source", "problem", "first offset", "duplicate offsets"):
            table.add_column(name, overflow="fold")
        for row in report["offset_problems"][:max_rows]:
            table.add_row(row["host"], row["source"], row["problem"], str(row["first_offset"]),
                          str(row["duplicate_offsets"]))
        console.print(table)
    if report["agent_losses"]:
        table = Table(title="lost on nodes (reported by the agent)", header_style="bold", title_justify="left")
        for name in ("host", "source", "reason", "lost bytes", "events"):
            table.add_column(name, overflow="fold")
        for row in report["agent_losses"][:max_rows]:
            table.add_row(row["host"], row["source"], row["reason"], str(row["lost_bytes"]), str(row["events"]))
        console.print(table)
    if report["unreadable_files"]:
        console.print(f"[bold red]unreadable files[/]: {report['unreadable_file_count']} Parquet file(s) of the "
                      "archive cannot be read; their records are missing from every answer")
        table = Table(title="unreadable files", header_style="bold", title_justify="left")
        for name in ("file", "problem"):
            table.add_column(name, overflow="fold")
        for row in report["unreadable_files"][:max_rows]:
            table.add_row(row["path"], row["problem"])
        console.print(table)
    if report["archive_wal_losses"]:
        table = Table(title="lost in an archive's write-ahead log (damaged entries)", header_style="bold",
                      title_justify="left")
        for name in ("archive", "segment", "byte", "entries", "records", "bytes", "arrived"):
            table.add_column(name, overflow="fold")
        for row in report["archive_wal_losses"][:max_rows]:
            table.add_row(str(row["archive_id"]), str(row["segment"]), str(row["position"]), str(row["entries"]),
                          "unknown" if row["records"] is None else str(row["records"]), str(row["bytes"]), row["ts"])
        console.print(table)
    if report["parse_errors"]:
        table = Table(title="parse errors", header_style="bold", title_justify="left")
        for name in ("host", "source", "format", "lines"):
            table.add_column(name, overflow="fold")
        for row in report["parse_errors"][:max_rows]:
            table.add_row(row["host"], row["source"], row["format"], str(row["errors"]))
        console.print(table)


PROBLEM_COLUMNS = ("kind", "host", "source", "source_id", "format", "pid", "job", "rank", "file", "after_seq",
                   "next_seq", "missing", "after_ts", "next_ts", "problem", "first_offset", "duplicate_offsets",
                   "reason", "lost_bytes", "events", "errors", "records")
_PROBLEMS = (("seq_gap", "seq_gaps"), ("offset", "offset_problems"), ("agent_loss", "agent_losses"),
             ("archive_wal_loss", "archive_wal_losses"),
             ("parse_error", "parse_errors"), ("inferred_ts", "inferred_ts"))


def integrity_summary(report: dict[str, Any]) -> str:
    return (f"{'OK' if report['ok'] else 'RECORDS MISSING'}: {report['records']} records, {report['processes']} "
            f"logger processes, {report['sources']} sources; {report['missing_records']} missing in "
            f"{report['seq_gap_count']} seq gap(s), {report['offset_problem_count']} offset problem(s), "
            f"{report['parse_error_total']} parse error(s), {report['restarts']} process restart(s), "
            f"{report['inferred_ts_total']} record(s) with an inferred time, "
            f"{report['agent_lost_bytes']} byte(s) lost on nodes (agent-reported)" + _wal_summary(report))


def _wal_summary(report: dict[str, Any]) -> str:
    if not report["archive_wal_losses"]:
        return ""
    entries, unknown = report["archive_wal_lost_entries"], report["archive_wal_records_unknown"]
    return (f"; archive WAL damage: {report['archive_wal_lost_records']} record(s) in {entries} acknowledged "
            f"write-ahead log entr{'y' if entries == 1 else 'ies'} lost"
            + (f" (+ {unknown} region(s) whose record count is unknown)" if unknown else ""))


def integrity_rows(report: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """Every problem listed in the report as one CSV row, its kind first (``--format csv``)."""
    rows = [{"kind": kind, **row} for kind, key in _PROBLEMS for row in report[key]]
    columns = list(dict.fromkeys([*PROBLEM_COLUMNS, *(name for row in rows for name in row)]))
    return columns, rows


def integrity_lines(report: dict[str, Any]) -> list[str]:
    """The report as plain text (``--format raw``): the summary, then one line per problem."""
    lines = [integrity_summary(report)]
    for row in integrity_rows(report)[1]:
        lines.append(" ".join(f"{k}={v}" for k, v in row.items() if v is not None))
    return lines
