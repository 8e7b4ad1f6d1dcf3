"""``ranklog triage``: which rank failed first, and why.

Prints the verdict first (root-cause rank(s) and node(s), category, confidence, the decisive record
with its traceback, what that rank wrote just before), then the evidence. ``--json`` prints the
complete result as one JSON document. Exit status 0 whether or not a failure was found (the
verdict says which); 2 on a usage or read error.
"""

from __future__ import annotations

import argparse

from ._source_flags import Parser, add_engine_flags, add_source_flags, open_from_args, read_errors, report_engine

_EPILOG = """examples:
  ranklog triage --archive /srv/ranklog --job ppo-qwen7b --since 6h
  ranklog triage --log_dir /tmp/ray/session_latest/logs
  ranklog triage --archive https://archive:8470 --token-file token --json | jq .verdict
  ranklog triage --archive /srv/ranklog --annotate https://archive:8470 --token-file token  # Grafana annotation"""


def add_selection_flags(parser: argparse.ArgumentParser) -> None:
    """--job and the time flags (shared with ``ranklog report``)."""
    from ranklog.query.filter_flags import add_time_flags

    group = parser.add_argument_group("selection")
    group.add_argument("--job", help="job / run id (default: the job with the newest record)")
    add_time_flags(parser)


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = Parser(prog=prog, description="Find the rank that failed first, and why.",
                                     epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_source_flags(parser)
    add_engine_flags(parser)
    add_selection_flags(parser)
    parser.add_argument("--json", action="store_true", help="print the whole result as JSON")
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
    import json
    import sys

    from ranklog.triage.present import make_console, render, to_dict

    result = run_triage(args)
    if getattr(args, "annotate", None):
        from ranklog.query.sources import read_token
        from ranklog.triage.annotation import post_verdict

        post_verdict(args.annotate, read_token(args.token_file), result)
    if args.json:
        json.dump(to_dict(result), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        render(result, make_console())
    return 0
