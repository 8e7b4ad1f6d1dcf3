"""The one entry point: ``ranklog <command> …``.

Built on argparse (stdlib) because ``ranklog run`` and ``ranklog context`` must work in the core,
dependency-free install inside training images. Each command lives in ``ranklog.commands.<name>``
and exposes ``build_parser(prog) -> ArgumentParser`` and ``main(args) -> int``; command modules
import only the stdlib at module level, so ``--help`` is instant and a missing extra is reported
as one line naming the extra to install.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import sys
from collections.abc import Sequence

from . import __version__
from .errors import MissingExtraError, UserError

# name -> (module, extra it needs, one-line summary)
COMMANDS: dict[str, tuple[str, str | None, str]] = {
    "run": ("run", None, "run a training command; capture its stdout/stderr as structured per-rank records"),
    "context": ("context", None, "print a fresh trace context for RANKLOG_TRACE_CONTEXT"),
    "agent": ("agent", "agent", "the node agent: tail log files, ship them to the archive, export metrics"),
    "archive": ("archive", "archive", "the archive service: durable ingest into hive-partitioned Parquet"),
    "query": ("query", "query", "filter and export records from an archive or a raw log directory"),
    "diagnose": ("query", "query", "alias of query (accepts --log_dir/--start_time/--end_time spellings)"),
    "trace": ("trace", "query", "every record of one trace across nodes, with the time between hops"),
    "stats": ("stats", "query", "log traffic per node, level, rank and over time"),
    "integrity": ("integrity", "query", "find lost records: seq gaps, offset gaps, parse errors"),
    "triage": ("triage", "query", "which rank failed first, and why"),
    "report": ("report", "query", "self-contained HTML report: verdict, timelines, throughput, templates"),
    "check-config": ("check_config", "agent", "check an agent or archive YAML config; exit 2 naming the bad key"),
    "demo": ("demo", "test", "run the whole pipeline on this machine with a simulated failing 16-rank job"),
}
_THIRD_PARTY_ROOTS = {"pyarrow", "duckdb", "prometheus_client", "yaml", "httpx", "starlette", "uvicorn", "rich", "numpy"}


def _usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"ranklog {__version__} — logs of distributed training, from every rank to one verdict", "",
             "usage: ranklog <command> [options]   (ranklog <command> --help for its options)", "", "commands:"]
    lines += [f"  {name.ljust(width)}  {summary}" for name, (_, _, summary) in COMMANDS.items()]
    return "\n".join(lines)


def _one_spelling(formatter: type[argparse.HelpFormatter]) -> type[argparse.HelpFormatter]:
    """`formatter` listing one long spelling per flag: aliases (``--start_time``, ``--log-dir``) are
    accepted but not shown twice."""
    class OneSpelling(formatter):  # type: ignore[misc, valid-type]
        def _format_action_invocation(self, action: argparse.Action) -> str:
            longs = [s for s in action.option_strings if s.startswith("--")]
            if len(longs) > 1:
                shown = [s for s in action.option_strings if not s.startswith("--")] + longs[:1]
                action = copy.copy(action)
                action.option_strings = shown
            return super()._format_action_invocation(action)

    return OneSpelling


def build_parser(name: str) -> argparse.ArgumentParser:
    """The parser of command `name` (its module is imported), as ``ranklog NAME --help`` shows it."""
    module_name, _, _ = COMMANDS[name]
    parser = importlib.import_module(f"ranklog.commands.{module_name}").build_parser(f"ranklog {name}")
    parser.formatter_class = _one_spelling(parser.formatter_class)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(_usage())
        return 0 if argv else 2
    if argv[0] in ("-V", "--version"):
        print(f"ranklog {__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"ranklog: unknown command {name!r}; commands: {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    module_name, extra, _ = COMMANDS[name]
    try:
        module = importlib.import_module(f"ranklog.commands.{module_name}")
        parser = build_parser(name)
        args = parser.parse_args(rest)
        args.command = name
        return int(module.main(args) or 0)
    except ModuleNotFoundError as exc:
        root = (exc.name or "").split(".")[0]
        if root in _THIRD_PARTY_ROOTS and extra:
            print(f"ranklog {name}: {MissingExtraError(name, extra, root)}", file=sys.stderr)
            return 2
        raise
    except UserError as exc:
        print(f"ranklog {name}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
