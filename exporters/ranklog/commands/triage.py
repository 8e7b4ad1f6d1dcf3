"""``ranklog triage``: which rank failed first, and why.

Prints the verdict first (root-cause rank(s) and node(s), category, confidence, the decisive record
with its traceback, what that rank wrote just before), then the evidence. Output (:mod:`._output`):
the rich view on a terminal, plain uncut text when piped, ``--format json`` the complete result as
one JSON document, ``--format csv`` each rank's first error. Every job of the range is judged on its
own; the one shown first is a failed one if any, and the others' verdicts follow.

Exit status (``ranklog report`` the same), for scripts: 0 no failure (also: no data), 1 a failure
found, 3 degraded (a straggler or slow-down, no failure), 2 a usage or read error. With several
jobs the worst decides (1 before 3 before 0).
"""

from __future__ import annotations

import argparse

from ._output import add_output_flags, chosen_format, emit
from ._source_flags import Parser, add_engine_flags, add_source_flags, open_from_args, read_errors, report_engine

FORMATS = ("table", "raw", "json", "csv")
PIPED = "raw"

_EPILOG = """examples:
  ranklog triage --archive /srv/ranklog --job ppo-qwen7b --since 6h
  ranklog triage --log_dir /tmp/ray/session_latest/logs
  ranklog triage --archive https://archive:8470 --token-file token --format json | jq .verdict
  ranklog triage --archive /srv/ranklog --annotate https://archive:8470 --token-file token  # Grafana annotation
exit status: 0 no failure, 1 failure found, 3 degraded (straggler / slow-down), 2 usage or read error"""


def add_selection_flags(parser: argparse.ArgumentParser) -> None:
    """--job and the time flags (shared with ``ranklog report``)."""
    from ranklog.query.filter_flags import add_time_flags

    group = parser.add_argument_group("selection")
    group.add_argument("--job", help="job / run id: only its records (default: every job in the range, each judged "
                                     "on its own)")
    add_time_flags(parser)


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = Parser(prog=prog, description="Find the rank that failed first, and why.",
                                     epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_source_flags(parser)
    add_engine_flags(parser)
    add_selection_flags(parser)
    add_output_flags(parser, FORMATS, PIPED)
    parser.add_argument("--annotate", metavar="URL",
                        help="also post the verdict to the archive at URL as a format=\"triage\" record: an annotation "
                             "on the Grafana training dashboard (token from --token-file or $RANKLOG_TOKEN)")
    return parser


def time_range(args: argparse.Namespace) -> tuple[int | None, int | None]:
    from ranklog.query.filter_flags import time_window

    return time_window(args)


def run_triage(args: argparse.Namespace):
    """Open the source named by the flags and triage it (also used by ``ranklog report``)."""
    from ranklog.triage.analyze import analyze
    from ranklog.triage.gather import TriageData

    start, end = time_range(args)
    source = open_from_args(args)
    with read_errors(source.describe()):
        data = TriageData.from_source(source, start, end)
        result = analyze(data, args.job, start, end)
    report_engine(source)
    return result


def main(args: argparse.Namespace) -> int:

    from ranklog.triage.present import make_console, render, to_dict, triage_lines, triage_rows

    fmt = chosen_format(args, FORMATS, PIPED)
    result = run_triage(args)
    if getattr(args, "annotate", None):
        from ranklog.query.sources import read_token
        from ranklog.triage.annotation import post_verdict

        token = read_token(args.token_file)
        for judged in result.all:
            if judged.job is not None or len(result.all) == 1:
                post_verdict(args.annotate, token, judged)
    emit(args, to_dict(result), fmt, table=lambda _: render(result, make_console()), raw=triage_lines, rows=triage_rows)
    return result.exit_code
