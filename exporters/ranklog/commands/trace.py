"""``ranklog trace ID``: every record of one trace across nodes, in time order, with the time between hops."""

from __future__ import annotations

import argparse
import json
import sys

from ._source_flags import Parser, add_source_flags, open_from_args, read_errors


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = Parser(prog=prog, description="Show every record of one trace across nodes.")
    parser.add_argument("trace_id", metavar="ID", help="the trace id (e.g. from a record's trace_id)")
    add_source_flags(parser)
    window = parser.add_argument_group("narrow the search (optional; makes a lookup in a large archive faster)")
    window.add_argument("--start", "--start_time", "--start-time", dest="start", help="inclusive start (UTC)")
    window.add_argument("--end", "--end_time", "--end-time", dest="end", help="exclusive end (UTC)")
    window.add_argument("--since", help="only the last DURATION (e.g. 2h)")
    parser.add_argument("--json", action="store_true", help="print the trace as JSON")
    return parser


def main(args: argparse.Namespace) -> int:
    import time

    from ranklog.errors import UserError
    from ranklog.query.filter_flags import parse_time
    from ranklog.query.filters import QuerySpec
    from ranklog.query.trace import build_trace, render_trace

    now = time.time_ns()
    if args.since and args.start:
        raise UserError("give either --since or --start, not both")
    start = parse_time(args.since or args.start, now, "--since" if args.since else "--start") \
        if (args.since or args.start) else None
    end = parse_time(args.end, now, "--end") if args.end else None
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
