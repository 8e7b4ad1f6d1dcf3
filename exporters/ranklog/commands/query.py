"""``ranklog query`` (and its alias ``ranklog diagnose``): filter, export and follow records.

Reads an archive (directory, object storage, or a running archive over HTTP) or a raw log directory;
the filters and outputs are described in :mod:`ranklog.query.filters` and
:mod:`ranklog.query.outputs`, follow and tail in :mod:`ranklog.query.follow`. The optional positional
argument is a LogQL log query (``'{rank="2", level=~"ERROR|CRITICAL"} |= "NCCL"'``: stream matchers
over job, host, rank, local_rank, role, level, format, trace_id and line filters over the message and
traceback), AND-ed with the flags. Exit status: 0 when records were found (or followed), 1 when
nothing matched (one line on stderr says what was searched and where the data is), 2 on a usage or
read error.
"""

from __future__ import annotations

import argparse
import sys

from ._source_flags import Parser, add_engine_flags, add_source_flags, open_from_args, read_errors, report_engine

_EPILOG = """examples:
  ranklog diagnose --log_dir ./logs --start_time "2h ago" --end_time now --level ERROR --output error_analysis.csv
  ranklog query --archive /srv/ranklog --since 2h --rank 0-7,12 --regex 'NCCL|CUDA' --limit 50
  ranklog query --archive /srv/ranklog '{rank="3"} |= "CUDA"' --since 1h30m
  ranklog query --archive /srv/ranklog --job 'ppo-*' --level ERROR -n 20 --tz local
  ranklog query --archive https://archive:8470 --token-file token --trace-id 4bf92f35 --format ndjson
follow: ranklog query --archive https://archive:8470 --token-file token --level WARNING -f
times without a zone are UTC (or --tz); --from is inclusive, --until exclusive."""
FOLLOW_FORMATS = ("raw", "ndjson", "csv")
FOLLOW_TAIL = 10  # records shown before following, as tail -f and journalctl -f do


def build_parser(prog: str) -> argparse.ArgumentParser:
    from ranklog.query.filter_flags import add_filter_flags
    from ranklog.query.outputs import FORMATS

    parser = Parser(prog=prog, description="Filter, export and follow log records.", epilog=_EPILOG,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logql", nargs="?", metavar="LOGQL",
                        help='a LogQL log query, e.g. \'{rank="2", level="ERROR"} |= "NCCL"\' (AND-ed with the flags)')
    add_source_flags(parser)
    add_engine_flags(parser)
    add_filter_flags(parser)
    out = parser.add_argument_group("output")
    out.add_argument("-o", "--output", metavar="FILE", help="write to FILE; format from the extension "
                     "(.csv .json .ndjson/.jsonl .parquet .txt)")
    out.add_argument("--format", choices=FORMATS,
                     help="format on stdout (default: table on a terminal, ndjson when piped; raw is one plain "
                          "line per record)")
    out.add_argument("--columns", help="comma-separated columns (default: all; the table shows a readable subset)")
    out.add_argument("--limit", help="at most N records (after sorting)")
    out.add_argument("-n", "--tail", metavar="N", help="only the last N records, in time order")
    out.add_argument("-f", "--follow", action="store_true",
                     help=f"then keep printing new records as they arrive (shows the last {FOLLOW_TAIL} first; "
                          "-n 0 only new ones); Ctrl-C stops")
    out.add_argument("--count", action="store_true", help="print only the number of matching records")
    out.add_argument("--sort", help="sort keys: ts (default), ts:desc (newest first; also --sort=-ts), host,ts, or none")
    return parser


def _selector(text: str):
    from ranklog.errors import UserError
    from ranklog.query.logql import LogQLError, LogSelector, parse
    from ranklog.query.logql.labels import SELECTOR_LABELS

    try:
        query = parse(text)
    except LogQLError as exc:
        raise UserError(f"LOGQL {text!r}: {exc}") from None
    if not isinstance(query, LogSelector):
        raise UserError(f"LOGQL {text!r} is a metric query; ranklog query takes a log query such as "
                        '\'{rank="2"} |= "NCCL"\' (metric queries: Grafana, or ranklog stats)')
    unknown = sorted({name for name, _, _ in query.matchers if name not in SELECTOR_LABELS})
    if unknown:
        raise UserError(f"LOGQL {text!r}: no record has the label(s) {', '.join(unknown)} "
                        f"(labels: {', '.join(SELECTOR_LABELS)})")
    return query


def _whole_number(value: str | None, flag: str) -> int | None:
    from ranklog.errors import UserError

    if value is None:
        return None
    if not value.strip().isdigit():
        raise UserError(f"bad {flag} {value!r}: expected a whole number")
    return int(value)


def main(args: argparse.Namespace) -> int:
    import dataclasses

    from ranklog.errors import UserError
    from ranklog.query import engine
    from ranklog.query.filter_flags import spec_from_args, split_list
    from ranklog.query.logql.spec import with_selector
    from ranklog.query.nothing_found import explain
    from ranklog.query.outputs import RAW_COLUMNS, TABLE_COLUMNS, TABLE_MAX_ROWS, export, format_for_path
    from ranklog.query.times import zone

    spec = spec_from_args(args)
    if args.logql:
        try:
            spec = with_selector(spec, _selector(args.logql))
        except ValueError as exc:  # a pipeline stage the record scan cannot do: refused, never ignored
            raise UserError(f"LOGQL {args.logql!r}: {exc}") from None
    tail = _whole_number(args.tail, "--tail")
    if tail is not None and spec.limit is not None:
        raise UserError("give --tail N (the last N) or --limit N (the first N), not both")
    if args.follow and (args.count or args.output or spec.end_ns is not None):
        raise UserError("--follow prints to stdout until Ctrl-C: it takes no --count, --output or --until")
    if args.count and tail is not None:
        raise UserError("give --count or --tail, not both")
    if args.output:
        fmt = format_for_path(args.output)
        if args.format and args.format != fmt:
            raise UserError(f"--format {args.format} and --output {args.output} disagree: the extension picks the "
                            "format of a file")
    else:
        fmt = args.format or ("ndjson" if not sys.stdout.isatty() else "raw" if args.follow else "table")
    if args.follow and fmt not in FOLLOW_FORMATS:
        raise UserError(f"--follow streams records: use --format {', '.join(FOLLOW_FORMATS)} (not {fmt})")
    tz = zone(args.tz)
    source = open_from_args(args)
    with read_errors(source.describe()):
        if args.count:
            found = engine.count(source, spec)
            print(found)
            report_engine(source)
            return 0 if found else _nothing(args, explain(source, spec, args.tz))
        default_columns = {"table": TABLE_COLUMNS, "raw": RAW_COLUMNS}.get(fmt)
        selected = engine.check_columns(split_list(args.columns) or default_columns)
        schema = engine.schema_of(selected)
        if args.follow:
            return _follow(source, spec, selected, schema, fmt, FOLLOW_TAIL if tail is None else tail, tz)
        table_rows = spec.limit if spec.limit is not None else tail if tail is not None else TABLE_MAX_ROWS
        if tail is not None:
            from ranklog.query.follow import last

            batches = iter(last(source, spec, selected, tail).to_batches())
        else:
            if fmt == "table" and spec.limit is None:
                # A terminal shows the first rows; reading one more than shown tells "there are more".
                spec = dataclasses.replace(spec, limit=TABLE_MAX_ROWS + 1)
            batches = engine.scan(source, spec, selected)
        rows = export(batches, schema, fmt, args.output, table_rows=table_rows, tz=tz)
        hint = explain(source, spec, args.tz) if rows == 0 else None
    report_engine(source)
    if args.output:
        print(f"wrote {rows} record{'s' if rows != 1 else ''} to {args.output}", file=sys.stderr)
    return _nothing(args, hint) if hint else 0


def _nothing(args: argparse.Namespace, hint: str) -> int:
    from ranklog.query.nothing_found import EXIT_NOTHING_FOUND

    print(f"ranklog {getattr(args, 'command', 'query')}: {hint}", file=sys.stderr)
    return EXIT_NOTHING_FOUND


def _follow(source, spec, columns, schema, fmt: str, tail: int, tz) -> int:
    from ranklog.query.follow import follow
    from ranklog.query.outputs import make_writer, use_color

    writer = make_writer(fmt, sys.stdout.buffer, schema, tz=tz, color=use_color())
    if source.kind != "remote" and sys.stderr.isatty():
        print(f"following {source.describe()} (Ctrl-C stops)", file=sys.stderr)
    for batch in follow(source, spec, columns, tail):
        writer.write_batch(batch)
        sys.stdout.buffer.flush()
    return 0
