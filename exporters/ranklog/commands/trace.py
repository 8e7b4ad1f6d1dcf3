"""``ranklog trace ID``: every record of one trace across nodes, in time order, with the time between hops."""

from __future__ import annotations

import argparse
import json
import sys

from ._source_flags import Parser, add_source_flags, open_from_args, read_errors


def build_parser(prog: str) -> argparse.ArgumentParser:
    from ranklog.query.filter_flags import add_time_flags

    parser = Parser(prog=prog, description="Show every record of one trace across nodes.")
    parser.add_argument("trace_id", metavar="ID", help="the trace id (e.g. from a record's trace_id)")
    add_source_flags(parser)
    add_time_flags(parser, "narrow the search (optional; makes a lookup in a large archive faster)")
    parser.add_argument("--json", action="store_true", help="print the trace as JSON")
    return parser


def main(args: argparse.Namespace) -> int:
    from ranklog.query.filter_flags import time_window
    from ranklog.query.filters import QuerySpec
    from ranklog.query.trace import build_trace, render_trace

    start, end = time_window(args)
    spec = QuerySpec(start_ns=start, end_ns=end)
    source = open_from_args(args)
    with read_errors(source.describe()):
        report = build_trace(source, args.trace_id, spec)
    if args.json:
        json.dump(report, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
    else:
        render_trace(report)
    return 0 if report["records"] else 1
