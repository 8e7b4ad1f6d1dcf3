"""``ranklog integrity``: seq gaps, offset coverage and parse errors; exit 1 when records are missing.

Meant for a periodic timer: ``ranklog integrity --archive /srv/ranklog --since 1h --json``.
"""

from __future__ import annotations

import argparse
import json
import sys

from ._source_flags import Parser, add_source_flags, open_from_args, read_errors


def build_parser(prog: str) -> argparse.ArgumentParser:
    from ranklog.query.filter_flags import add_filter_flags

    parser = Parser(
        prog=prog, description="Find lost records: per-process seq gaps, offset coverage, parse errors. "
                               "Exit status 1 when records are missing.")
    add_source_flags(parser)
    add_filter_flags(parser, trace_flag=False)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--fail-on-parse-errors", "--fail_on_parse_errors", dest="fail_on_parse_errors",
                        action="store_true", help="also exit 1 when some lines did not parse")
    return parser


def main(args: argparse.Namespace) -> int:
    from ranklog.query.filter_flags import spec_from_args
    from ranklog.query.integrity import check_integrity, render_integrity

    args.limit = args.sort = None
    spec = spec_from_args(args)
    source = open_from_args(args)
    with read_errors(source.describe()):
        report = check_integrity(source, spec)
    if args.json:
        json.dump(report, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        render_integrity(report)
    failed = not report["ok"] or (args.fail_on_parse_errors and report["parse_error_total"] > 0)
    return 1 if failed else 0
