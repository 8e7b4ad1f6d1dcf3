"""``ranklog run [--log-dir D] [--format json|text] [--job J] [--monitoring-port P] -- CMD …``."""

from __future__ import annotations

import argparse


def build_parser(prog: str) -> argparse.ArgumentParser:
    from ..config_loader import add_config_flags
    from ..log.log_config import LoggingConfig, resolve

    try:
        where = resolve().log_dir
    except Exception:  # a bad RANKLOG_* variable: `ranklog run` itself reports it
        where = "$RANKLOG_LOG_DIR"
    parser = argparse.ArgumentParser(
        prog=prog, description="Run a training command; capture its stdout/stderr as structured per-rank records "
                               "(teed to the console unchanged). Exits with the command's exit status. "
                               f"Records are written under {where}/<job>/<host>/ (--log-dir, $RANKLOG_LOG_DIR), "
                               "where `ranklog agent --preset ranklog` on this machine reads them and "
                               f"`ranklog query --log_dir {where}` finds them.",
        usage=f"{prog} [options] -- CMD [ARGS ...]")
    parser.add_argument("--config", help="YAML file with a logging: block (flags and RANKLOG_* override it)")
    add_config_flags(parser, LoggingConfig)
    parser.add_argument("--log_format", "--log-format", dest="cfg:format", default=None, metavar="FORMAT",
                        help="alias of --format (json|text)")
    parser.add_argument("--monitoring-port", "--monitoring_port", type=int, default=None,
                        help="serve Prometheus /metrics for the captured records on this port (needs the agent extra)")
    parser.add_argument("--monitoring-host", "--monitoring_host", default="127.0.0.1",
                        help="address for --monitoring-port (default: 127.0.0.1)")
    parser.add_argument("--max-line-bytes", "--max_line_bytes", type=int, default=1 << 20,
                        help="cut captured lines longer than this (default: 1 MiB; the console copy is never cut)")
    # `command` is taken: ranklog.cli stores the subcommand's name there.
    parser.add_argument("argv", nargs=argparse.REMAINDER, metavar="CMD", help="the command to run, after --")
    return parser


def main(args: argparse.Namespace) -> int:
    from ..config_loader import flag_overrides
    from ..errors import UserError
    from ..log.log_config import resolve
    from ..run import RunOptions, run

    command = list(args.argv)
    if command and command[0] == "--":
        command = command[1:]
    if args.max_line_bytes < 1024:
        raise UserError("--max-line-bytes must be at least 1024")
    config = resolve(args.config, **flag_overrides(args))
    return run(RunOptions(command=command, config=config, monitoring_port=args.monitoring_port,
                          monitoring_host=args.monitoring_host, max_line_bytes=args.max_line_bytes))
