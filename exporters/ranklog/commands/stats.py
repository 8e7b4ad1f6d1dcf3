"""``ranklog stats``: records per node, level, rank and over time (the log-traffic distribution).

Output (:mod:`._output`): tables on a terminal, plain uncut text when piped; ``--format json|csv``
and ``-o FILE`` as for every command. Exit 1 when no record matched.
"""

from __future__ import annotations

import argparse

from ._output import add_output_flags, chosen_format, emit
from ._source_flags import Parser, add_source_flags, open_from_args, read_errors

FORMATS = ("table", "raw", "json", "csv")
PIPED = "raw"


def build_parser(prog: str) -> argparse.ArgumentParser:
    from ranklog.query.filter_flags import add_filter_flags

    parser = Parser(prog=prog, description="Log traffic per node, level, rank and over time.")
    add_source_flags(parser)
    add_filter_flags(parser)
    parser.add_argument("--bucket", help="time bucket for 'over time' (e.g. 5m, 1h; default: fits ~48 rows)")
    add_output_flags(parser, FORMATS, PIPED)
    return parser


def main(args: argparse.Namespace) -> int:
    import sys

    from ranklog.errors import UserError
    from ranklog.query.filter_flags import spec_from_args
    from ranklog.query.nothing_found import EXIT_NOTHING_FOUND, explain
    from ranklog.query.stats import compute_stats, render_stats, stats_lines, stats_rows
    from ranklog.units import parse_duration

    fmt = chosen_format(args, FORMATS, PIPED)
    args.limit = args.sort = None
    spec = spec_from_args(args)
    try:
        bucket = parse_duration(args.bucket) if args.bucket else None
    except ValueError as exc:
        raise UserError(f"--bucket: {exc}") from None
    source = open_from_args(args)
    with read_errors(source.describe()):
        stats = compute_stats(source, spec, bucket)
        if not stats["total"]:
            print(f"ranklog stats: {explain(source, spec, args.tz)}", file=sys.stderr)
            return EXIT_NOTHING_FOUND
    emit(args, stats, fmt, table=render_stats, raw=stats_lines, rows=stats_rows)
    return 0
