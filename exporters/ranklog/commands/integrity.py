"""``ranklog integrity``: seq gaps, offset coverage and parse errors; exit 1 when records are missing.

Meant for a periodic timer: ``ranklog integrity --archive /srv/ranklog --since 1h --format json``.
Output (:mod:`._output`): tables on a terminal, plain uncut text when piped. An empty selection is
said on stderr (where the data is) and is not a failure (exit 0): nothing is missing from nothing.
"""

from __future__ import annotations

import argparse

from ._output import add_output_flags, chosen_format, emit
from ._source_flags import Parser, add_source_flags, open_from_args, read_errors

FORMATS = ("table", "raw", "json", "csv")
PIPED = "raw"


def build_parser(prog: str) -> argparse.ArgumentParser:
    from ranklog.query.filter_flags import add_filter_flags

    parser = Parser(
        prog=prog, description="Find lost records: per-process seq gaps, offset coverage, parse errors. "
                               "Exit status 1 when records are missing.")
    add_source_flags(parser)
    add_filter_flags(parser, trace_flag=False)
    parser.add_argument("--fail-on-parse-errors", "--fail_on_parse_errors", dest="fail_on_parse_errors",
                        action="store_true", help="also exit 1 when some lines did not parse")
    add_output_flags(parser, FORMATS, PIPED)
    return parser


def main(args: argparse.Namespace) -> int:
    import sys

    from ranklog.query.filter_flags import spec_from_args
    from ranklog.query.integrity import check_integrity, integrity_lines, integrity_rows, render_integrity
    from ranklog.query.nothing_found import explain

    fmt = chosen_format(args, FORMATS, PIPED)
    args.limit = args.sort = None
    spec = spec_from_args(args)
    source = open_from_args(args)
    with read_errors(source.describe()):
        report = check_integrity(source, spec)
        if not report["records"]:
            print(f"ranklog integrity: {explain(source, spec, args.tz)}", file=sys.stderr)
    emit(args, report, fmt, table=render_integrity, raw=integrity_lines, rows=integrity_rows)
    failed = not report["ok"] or (args.fail_on_parse_errors and report["parse_error_total"] > 0)
    return 1 if failed else 0
