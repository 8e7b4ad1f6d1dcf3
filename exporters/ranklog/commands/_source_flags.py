"""Flags every read command shares: where to read (``--archive`` / ``--log_dir``) and the filters."""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from collections.abc import Iterator
from typing import Any, NoReturn

from ranklog.errors import UserError


class Parser(argparse.ArgumentParser):
    """argparse whose mistakes are one line (a UserError: exit 2, no usage dump, no traceback), and
    whose TIME flags take a value that starts with a dash (``--since -1h``, as journalctl does)."""

    def error(self, message: str) -> NoReturn:
        raise UserError(f"{message} (see {self.prog} --help)")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        words = list(sys.argv[1:] if args is None else args)
        timed = {flag for action in self._actions if action.metavar == "TIME" for flag in action.option_strings}
        joined: list[str] = []
        for word in words:
            if joined and joined[-1] in timed and re.match(r"-\d", word):
                joined[-1] = f"{joined[-1]}={word}"
            else:
                joined.append(word)
        return super().parse_known_args(joined, namespace)


def add_source_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("where to read (exactly one)")
    group.add_argument("--archive", metavar="DIR|URI|URL",
                       help="archive root (a directory, s3://bucket/prefix, …) or a running archive https://host:port")
    group.add_argument("--token-file", "--token_file", dest="token_file", metavar="FILE",
                       help="bearer token for a remote archive (first line; else $RANKLOG_TOKEN)")
    group.add_argument("--log_dir", "--log-dir", dest="log_dir", metavar="DIR",
                       help="a raw log directory, parsed on the fly (no service needed)")


def add_engine_flags(parser: argparse.ArgumentParser) -> None:
    """--engine / --ray_address: where an archive scan runs (:mod:`ranklog.query.ray_engine`)."""
    group = parser.add_argument_group("engine")
    group.add_argument("--engine", choices=("local", "ray"), default="local",
                       help="where the archive scan runs: this process (local, default) or tasks on your Ray "
                            "cluster (ray; needs the 'ray' extra; a local root must be at the same path on every node)")
    group.add_argument("--ray_address", "--ray-address", dest="ray_address", metavar="HOST:PORT",
                       help="the Ray cluster for --engine ray: its head's HOST:PORT, ray://HOST:PORT or auto "
                            "(default $RAY_ADDRESS)")


def log_dir_zone(args: argparse.Namespace) -> str | None:
    """The zone a --log_dir's times printed without one are read in: the time flags' ``--tz`` (else
    ``$RANKLOG_TZ``; ``local``: this machine's), the zone they read typed times in too; unset, this
    machine's (docs/parsing.md)."""
    from ranklog.query.times import TZ_ENV

    name = (getattr(args, "tz", None) or os.environ.get(TZ_ENV, "")).strip()
    return name or None


def open_from_args(args: argparse.Namespace) -> Any:
    from ranklog.query.sources import open_source

    source = open_source(archive=args.archive, log_dir=args.log_dir, token_file=args.token_file,
                         progress=sys.stderr.isatty(), timezone=log_dir_zone(args))
    engine = getattr(args, "engine", "local")
    if engine != "local" or getattr(args, "ray_address", None):
        from ranklog.query.ray_engine import attach

        attach(source, engine, args.ray_address, getattr(args, "command", None) or "query")
    return source


def report_engine(source: Any) -> None:
    """One line on stderr saying where a distributed scan ran (tasks, files, nodes, time)."""
    runner = getattr(source, "runner", None)
    if runner is not None and runner.tasks:
        print(runner.summary(), file=sys.stderr)


@contextlib.contextmanager
def read_errors(what: str) -> Iterator[None]:
    """Turn I/O and Arrow errors met while reading data into one clear line (UserError)."""
    import pyarrow as pa

    try:
        yield
    except UserError:
        raise
    except (OSError, pa.ArrowException) as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"reading {what} failed: {text}") from None
