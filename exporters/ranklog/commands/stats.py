"""``ranklog stats``: records per node, level, rank and over time (the log-traffic distribution)."""

from __future__ import annotations

import argparse
import json
import sys

from ._source_flags import Parser, add_source_flags, open_from_args, read_errors


def build_parser(prog: str) -> argparse.ArgumentParser:
    from ranklog.query.filter_flags import add_filter_flags

    parser = Parser(prog=prog, description="Log traffic per node, level, rank and over time.")
    add_source_flags(parser)
    add_filter_flags(parser)
    parser.add_argument("--bucket", help="time bucket for 'over time' (e.g. 5m, 1h; default: fits ~48 rows)")
    parser.add_argument("--json", action="store_true", help="print the statistics as JSON")
    return parser


def main(args: argparse.Namespace) -> int:
    from ranklog.errors import UserError
    from ranklog.query.filter_flags import spec_from_args
    from ranklog.query.stats import compute_stats, render_stats
    from ranklog.units import parse_duration

    args.limit = args.sort = None
    spec = spec_from_args(args)
    try:
        bucket = parse_duration(args.bucket) if args.bucket else None
    except ValueError as exc:
        raise UserError(f"--bucket: {exc}") from None
    source = open_from_args(args)
    with read_errors(source.describe()):
        stats = compute_stats(source, spec, bucket)
    if args.json:
        json.dump(stats, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        render_stats(stats)
    return 0
