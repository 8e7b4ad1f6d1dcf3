"""One output model for every read command: ``--format table|raw|json|csv`` (query adds ndjson and
parquet) and ``-o FILE``.

- On a terminal every command prints a table (rich; long values folded, lists shortened).
- Piped or redirected it prints what the next program reads without options and without losing
  anything to a terminal's width: records as NDJSON, one JSON object a line (``query``, ``trace``);
  a verdict or a summary as plain uncut text lines (``triage``, ``stats``, ``integrity``).
- ``--format`` picks any form anywhere: ``raw`` is plain text (for records journalctl's short form,
  one line each), ``json`` one JSON document, ``csv`` the command's rows (records, a trace's
  timeline, a triage's first error per rank, stats' distributions, integrity's problems).
- ``-o FILE`` writes to a file instead (atomically: the file appears complete or not at all); its
  extension picks the format (``.json`` ``.csv`` ``.txt``/``.log`` raw, and for query ``.ndjson``
  ``.parquet``). The old ``--json`` flag still means ``--format json``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

from ranklog.errors import UserError


def add_output_flags(parser: argparse.ArgumentParser, formats: tuple[str, ...], piped: str,
                     output_help: str | None = None) -> argparse._ArgumentGroup:
    """--format (one of `formats`; `piped` is the default when stdout is not a terminal), -o/--output
    and the hidden --json (= --format json)."""
    group = parser.add_argument_group("output")
    group.add_argument("--format", choices=formats, help=f"table, plain text (raw) or data; default: table on a "
                                                         f"terminal, {piped} when piped or redirected")
    group.add_argument("-o", "--output", metavar="FILE", help=output_help or (
        "write to FILE (atomically); its extension picks the format (.json .csv .txt)"))
    group.add_argument("--json", dest="format", action="store_const", const="json", help=argparse.SUPPRESS)
    return group


def chosen_format(args: argparse.Namespace, formats: tuple[str, ...], piped: str) -> str:
    """The format the flags ask for: --format, else -o's extension, else table or `piped`."""
    if args.output:
        from ranklog.query.outputs import EXTENSIONS

        ext = os.path.splitext(args.output)[1].lower()
        by_ext = EXTENSIONS.get(ext)
        if by_ext not in formats or by_ext == "table":
            known = " ".join(e for e, f in EXTENSIONS.items() if f in formats)
            raise UserError(f"--output {args.output}: unknown extension {ext or '(none)'!r} (use {known})")
        if args.format and args.format != by_ext:
            raise UserError(f"--format {args.format} and --output {args.output} disagree: the extension picks the "
                            "format of a file")
        return by_ext
    return args.format or ("table" if sys.stdout.isatty() else piped)


@contextlib.contextmanager
def destination(path: str | None) -> Iterator[IO[str]]:
    """stdout, or `path` written atomically (temp file + rename, removed if the command fails)."""
    if path is None:
        yield sys.stdout
        return
    from ranklog.query.outputs import atomic_file

    with atomic_file(path) as stream:
        yield stream


def write_json(document: Any, stream: IO[str]) -> None:
    json.dump(document, stream, indent=1, ensure_ascii=False, default=str)
    stream.write("\n")


def write_csv(columns: list[str], rows: Iterable[dict[str, Any]], stream: IO[str]) -> None:
    writer = csv.DictWriter(stream, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else json.dumps(v) if isinstance(v, (list, dict)) else v)
                         for k, v in row.items()})


def emit(args: argparse.Namespace, document: Any, fmt: str, *, table: Callable[[Any], None],
         raw: Callable[[Any], Iterable[str]], rows: Callable[[Any], tuple[list[str], Iterable[dict[str, Any]]]],
         ndjson: Callable[[Any], Iterable[dict[str, Any]]] | None = None) -> None:
    """Write a command's `document` in `fmt` to stdout or ``-o``: `table` prints it with rich, `raw`
    gives its text lines, `rows` its CSV columns and rows, `ndjson` its JSON objects (one a line)."""
    if fmt == "table":
        table(document)
        return
    with destination(args.output) as stream:
        if fmt == "json":
            write_json(document, stream)
        elif fmt == "csv":
            write_csv(*rows(document), stream)
        elif fmt == "ndjson" and ndjson is not None:
            for item in ndjson(document):
                stream.write(json.dumps(item, ensure_ascii=False, default=str) + "\n")
        else:
            for line in raw(document):
                stream.write(line.rstrip("\n") + "\n")
    if args.output:
        print(f"wrote {args.output}", file=sys.stderr)
