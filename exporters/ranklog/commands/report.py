"""``ranklog report``: one self-contained HTML file (verdict, error timeline per rank, log volume per
node, loss and throughput read from the logs, top error templates with example records).

The file needs no network to open. Same source and selection flags as ``ranklog triage``, and the
same exit status: 0 no failure, 1 a failure found, 3 degraded, 2 a usage or read error.
"""

from __future__ import annotations

import argparse

from ._source_flags import Parser, add_source_flags, read_errors
from .triage import add_selection_flags


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = Parser(prog=prog, description="Write a self-contained HTML report of a job.",
                                     epilog="example:\n  ranklog report --archive /srv/ranklog --job ppo-7b -o report.html",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_source_flags(parser)
    add_selection_flags(parser)
    parser.add_argument("-o", "--output", default="ranklog-report.html", metavar="FILE",
                        help="where to write the HTML (default: ranklog-report.html)")
    return parser


def main(args: argparse.Namespace) -> int:
    from ranklog.report import write_report
    from ranklog.triage.analyze import analyze
    from ranklog.triage.gather import TriageData

    from ._source_flags import open_from_args
    from .triage import time_range

    start, end = time_range(args)
    source = open_from_args(args)
    with read_errors(source.describe()):
        data = TriageData.from_source(source, start, end)
        result = analyze(data, args.job, start, end)
        path = write_report(data, result, args.output)
    job = f"job {result.job}: " if result.job is not None and result.others else ""
    print(f"report written to {path} — {job}{result.verdict.summary}")
    for other in result.others:
        print(f"  also: job {other.job or '(no job id)'} — {other.verdict.summary}")
    return result.exit_code
