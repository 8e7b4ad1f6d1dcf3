"""``ranklog query`` (and its alias ``ranklog diagnose``): filter and export records.

Reads an archive (directory, object storage, or a running archive over HTTP) or a raw log directory;
the filters and outputs are described in :mod:`ranklog.query.filters` and
:mod:`ranklog.query.outputs`. Exit status 0 also when nothing matched (the count says so).
"""

from __future__ import annotations

import argparse
import sys

from ._source_flags import Parser, add_engine_flags, add_source_flags, open_from_args, read_errors, report_engine

_EPILOG = """examples:
  ranklog diagnose --log_dir ./logs --start_time "2025-10-01 08:00:00" --end_time "2025-10-01 12:00:00" \\
      --level ERROR --output error_analysis.csv
  ranklog query --archive /srv/ranklog --since 2h --rank 0-7,12 --regex 'NCCL|CUDA' --limit 50
  ranklog query --archive https://archive:8470 --token-file token --trace-id 4bf92f35 --format ndjson
times without a zone are UTC; --start is inclusive, --end exclusive."""


def build_parser(prog: str) -> argparse.ArgumentParser:
    from ranklog.query.filter_flags import add_filter_flags

    parser = Parser(prog=prog, description="Filter and export log records.", epilog=_EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_source_flags(parser)
    add_engine_flags(parser)
    add_filter_flags(parser)
    out = parser.add_argument_group("output")
    out.add_argument("-o", "--output", metavar="FILE", help="write to FILE; format from the extension "
                     "(.csv .json .ndjson/.jsonl .parquet)")
    out.add_argument("--format", choices=("table", "csv", "json", "ndjson", "parquet"),
                     help="format on stdout (default: table on a terminal, ndjson when piped)")
    out.add_argument("--columns", help="comma-separated columns (default: all; the table shows a readable subset)")
    out.add_argument("--limit", help="at most N records (after sorting)")
    out.add_argument("--count", action="store_true", help="print only the number of matching records")
    out.add_argument("--sort", help="sort keys: ts (default), ts:desc (newest first; also --sort=-ts), host,ts, or none")
    return parser


def main(args: argparse.Namespace) -> int:
    import dataclasses

    import pyarrow as pa

    from ranklog.errors import UserError
    from ranklog.query import engine
    from ranklog.query.filter_flags import spec_from_args, split_list
    from ranklog.query.outputs import TABLE_COLUMNS, TABLE_MAX_ROWS, export, format_for_path
    from ranklog.record import arrow_schema

    spec = spec_from_args(args)
    if args.output and args.format:
        raise UserError("give --output FILE (format from its extension) or --format for stdout, not both")
    fmt = format_for_path(args.output) if args.output else args.format or (
        "table" if sys.stdout.isatty() else "ndjson")
    source = open_from_args(args)
    with read_errors(source.describe()):
        if args.count:
            print(engine.count(source, spec))
            report_engine(source)
            return 0
        columns = split_list(args.columns) or (TABLE_COLUMNS if fmt == "table" else None)
        selected = engine.check_columns(columns)
        schema = pa.schema([arrow_schema().field(name) for name in selected])
        table_rows = spec.limit if spec.limit is not None else TABLE_MAX_ROWS
        if fmt == "table" and spec.limit is None:
            # A terminal shows the first rows; reading one more than shown tells "there are more".
            spec = dataclasses.replace(spec, limit=TABLE_MAX_ROWS + 1)
        rows = export(engine.scan(source, spec, selected), schema, fmt, args.output, table_rows=table_rows)
    report_engine(source)
    if args.output:
        print(f"wrote {rows} record{'s' if rows != 1 else ''} to {args.output}", file=sys.stderr)
    return 0

