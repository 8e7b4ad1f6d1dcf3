"""``ranklog trace ID``: every record of one trace across nodes, in time order, with the time between hops.

Output (:mod:`._output`): a table on a terminal, the timeline as NDJSON when piped; ``--format
raw|json|csv`` and ``-o FILE`` as for every command. Exit 1 when no record carries the id.
"""

from __future__ import annotations

import argparse

from ._output import add_output_flags, chosen_format, emit
from ._source_flags import Parser, add_source_flags, open_from_args, read_errors

FORMATS = ("table", "raw", "json", "ndjson", "csv")
PIPED = "ndjson"


def build_parser(prog: str) -> argparse.ArgumentParser:
    from ranklog.query.filter_flags import add_time_flags

    parser = Parser(prog=prog, description="Show every record of one trace across nodes.")
    parser.add_argument("trace_id", metavar="ID", help="the trace id (e.g. from a record's trace_id)")
    add_source_flags(parser)
    add_time_flags(parser, "narrow the search (optional; makes a lookup in a large archive faster)")
    add_output_flags(parser, FORMATS, PIPED)
    return parser


def main(args: argparse.Namespace) -> int:
    import sys

    from ranklog.query.filter_flags import time_window
    from ranklog.query.filters import QuerySpec
    from ranklog.query.nothing_found import EXIT_NOTHING_FOUND, explain
    from ranklog.query.times import zone
    from ranklog.query.trace import render_trace, trace_lines, trace_rows

    fmt = chosen_format(args, FORMATS, PIPED)
    start, end = time_window(args)
    spec = QuerySpec(start_ns=start, end_ns=end, trace_ids=(args.trace_id.strip(),))
    source = open_from_args(args)
    with read_errors(source.describe()):
        from ranklog.query.trace import build_trace

        report = build_trace(source, args.trace_id, spec, zone(args.tz))
        hint = None if report["records"] else explain(source, spec, args.tz)
    if report["records"] or fmt == "json":  # a script reading JSON gets the (empty) document too
        emit(args, report, fmt, table=render_trace, raw=trace_lines, rows=trace_rows, ndjson=lambda r: r["timeline"])
    if hint is not None:
        print(f"ranklog trace: {hint}", file=sys.stderr)
        return EXIT_NOTHING_FOUND
    return 0
