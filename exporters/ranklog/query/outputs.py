"""Write a stream of record batches as a table, CSV, JSON, NDJSON or Parquet — without holding the
whole result in memory (except the terminal table, which is capped).

Decisions:

- ``--output FILE`` picks the format from the extension (``.csv``, ``.json``, ``.ndjson``/``.jsonl``,
  ``.parquet``/``.pq``); the file appears atomically (temp file + rename) only when the query
  succeeded, so a failed export never leaves a truncated file behind.
- On stdout the default is the readable table on a terminal and NDJSON when piped (a program
  reads it without options; ``--format`` picks any other). ``raw`` is journalctl's short form: one
  line per record, ``TIME LEVEL HOST rRANK LOGGER: MESSAGE``, a multi-line message or traceback
  continuing on lines indented by two spaces (so ``grep -v '^ '`` keeps the first lines); with
  ``--columns`` the chosen columns' values, space-separated.
- ``--tz`` shows times in another zone (``…+02:00``) in every text format; UTC keeps ``Z``.
- Text formats spell ``ts`` like the ranklog logger: RFC 3339 UTC with microseconds
  (``2026-12-02T13:04:05.123456Z``). ``attrs`` stays the JSON text it is in the archive (a string
  in JSON output too: ``jq '.attrs | fromjson'``), so every format carries the same values. Nulls
  are empty in CSV and ``null`` in JSON.
- JSON/NDJSON are encoded column-wise with Arrow kernels (rows holding rare control characters go
  through :mod:`json`), so exporting millions of rows is fast.
- The terminal table shows at most :data:`TABLE_MAX_ROWS` rows unless ``--limit`` is given (the
  query then stops after one more row, and the table says there are more).
"""

from __future__ import annotations

import abc
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

from ..errors import UserError
from ..record import ts_ns
from .times import is_utc, show

if TYPE_CHECKING:
    from datetime import tzinfo

    import pyarrow as pa

FORMATS = ("table", "raw", "csv", "json", "ndjson", "parquet")
EXTENSIONS = {".csv": "csv", ".json": "json", ".ndjson": "ndjson", ".jsonl": "ndjson",
              ".parquet": "parquet", ".pq": "parquet", ".txt": "raw", ".log": "raw"}
TABLE_MAX_ROWS = 1000
TABLE_COLUMNS = ("ts", "level", "host", "rank", "logger", "msg")
RAW_COLUMNS = ("ts", "level", "host", "rank", "logger", "msg", "exc")
LEVEL_COLORS = {"ERROR": "31", "CRITICAL": "1;31", "WARNING": "33", "DEBUG": "2"}
ENCODE_ROWS = 4096
_ESCAPES = (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"))
_RARE_CONTROL = "[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f\\x{2028}\\x{2029}]"
_NEEDS_ESCAPE = '["\\\\\\x00-\\x1f\\x7f\\x{2028}\\x{2029}]'


def use_color() -> bool:
    """ANSI colours on stdout: only on a terminal, and never with $NO_COLOR set (no-color.org)."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def format_for_path(path: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    if ext not in EXTENSIONS:
        raise UserError(f"--output {path}: unknown extension {ext or '(none)'!r} "
                        f"(use {', '.join(sorted(EXTENSIONS))})")
    return EXTENSIONS[ext]


def text_timestamps(batch: pa.RecordBatch, tz: tzinfo | None = None) -> pa.RecordBatch:
    """The batch with ``ts`` as RFC 3339 text (microseconds, ``Z``; in `tz` with its offset)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if "ts" not in batch.schema.names:
        return batch
    index = batch.schema.get_field_index("ts")
    if tz is not None and not is_utc(tz):  # on request only: Python per row
        text = pa.array([show(ns, tz) for ns in ts_ns(batch.column(index)).tolist()], pa.string())
        return batch.set_column(index, pa.field("ts", pa.string(), nullable=False), text)
    # A plain cast to text is ~30x faster than strftime on a zoned timestamp: "YYYY-MM-DD HH:MM:SS.ffffff".
    micro = batch.column(index).cast(pa.timestamp("us"), safe=False).cast(pa.string())
    text = pc.binary_join_element_wise(pc.replace_substring(micro, " ", "T", max_replacements=1), "Z", "")
    return batch.set_column(index, pa.field("ts", pa.string(), nullable=False), text)


def _escaped(column: pa.Array) -> tuple[pa.Array, pa.Array | None]:
    """JSON string escaping (without quotes) and a mask of rows needing the exact fallback."""
    import pyarrow.compute as pc

    if not pc.any(pc.match_substring_regex(column, _NEEDS_ESCAPE)).as_py():
        return column, None
    for old, new in _ESCAPES:
        if pc.any(pc.match_substring(column, old)).as_py():
            column = pc.replace_substring(column, old, new)
    rare = pc.fill_null(pc.match_substring_regex(column, _RARE_CONTROL), False)
    return column, rare if pc.any(rare).as_py() else None


def json_lines(batch: pa.RecordBatch, tz: tzinfo | None = None) -> pa.Array:
    """One compact JSON object per row (no trailing newline), encoded column-wise.

    Quotes of never-null string columns are folded into the separators and columns without
    characters to escape skip the escaping passes, so most rows cost a handful of kernel passes.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    batch = text_timestamps(batch, tz)
    parts: list[Any] = []
    pending = "{"
    rare = None
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        key = json.dumps(name) + ":"
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            text, column_rare = _escaped(column)
            if column_rare is not None:
                rare = column_rare if rare is None else pc.or_(rare, column_rare)
            if column.null_count == 0:
                parts += [pending + key + '"', text]
                pending = '",'
                continue
            text = pc.fill_null(pc.binary_join_element_wise('"', text, '"', ""), "null")
        else:
            text = pc.fill_null(pc.cast(column, pa.string()), "null")
        parts += [pending + key, text]
        pending = ","
    lines = pc.binary_join_element_wise(*parts, pending.rstrip(",") + "}", "")
    if rare is not None:
        rows = batch.filter(rare).to_pylist()
        exact = iter(json.dumps(row, ensure_ascii=False, separators=(",", ":"))
                     .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029") for row in rows)
        lines = pa.array([next(exact) if flag else line
                          for flag, line in zip(rare.to_pylist(), lines.to_pylist(), strict=True)], pa.string())
    return lines


class _Writer(abc.ABC):
    """Base: write_batch() for each batch, close() at the end; `rows` counts what was written."""

    def __init__(self, stream: IO[bytes], tz: tzinfo | None = None) -> None:
        self.stream = stream
        self.rows = 0
        self.tz = tz

    def write_batch(self, batch: pa.RecordBatch) -> None:
        self.rows += batch.num_rows
        self._write(batch)

    @abc.abstractmethod
    def _write(self, batch: pa.RecordBatch) -> None:
        """Write one batch in this output's format."""

    def close(self) -> None:
        self.stream.flush()


class CsvWriter(_Writer):
    def __init__(self, stream: IO[bytes], schema: pa.Schema, tz: tzinfo | None = None) -> None:
        import pyarrow as pa
        import pyarrow.csv as csv

        super().__init__(stream, tz)
        fields = [pa.field(f.name, pa.string()) if f.name == "ts" else f for f in schema]
        self._writer = csv.CSVWriter(stream, pa.schema(fields))

    def _write(self, batch: pa.RecordBatch) -> None:
        for piece in _slices(batch):
            self._writer.write_batch(text_timestamps(piece, self.tz))

    def close(self) -> None:
        self._writer.close()
        super().close()


def _slices(batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
    """Encode text in small slices: the working memory of the string kernels stays a few MB."""
    for start in range(0, batch.num_rows, ENCODE_ROWS):
        yield batch.slice(start, ENCODE_ROWS)


class NdjsonWriter(_Writer):
    def _write(self, batch: pa.RecordBatch) -> None:
        for piece in _slices(batch):
            self.stream.write(("\n".join(json_lines(piece, self.tz).to_pylist()) + "\n").encode("utf-8"))


class JsonWriter(_Writer):
    """A JSON array, one object per line, written incrementally."""

    def __init__(self, stream: IO[bytes], tz: tzinfo | None = None) -> None:
        super().__init__(stream, tz)
        self.stream.write(b"[")
        self._first = True

    def _write(self, batch: pa.RecordBatch) -> None:
        for piece in _slices(batch):
            lead = "\n" if self._first else ",\n"
            self._first = False
            self.stream.write((lead + ",\n".join(json_lines(piece, self.tz).to_pylist())).encode("utf-8"))

    def close(self) -> None:
        self.stream.write(b"\n]\n" if self.rows else b"]\n")
        super().close()


class ParquetWriter(_Writer):
    def __init__(self, stream: IO[bytes], schema: pa.Schema) -> None:
        import pyarrow.parquet as pq

        super().__init__(stream)
        self._writer = pq.ParquetWriter(stream, schema, compression="zstd")

    def _write(self, batch: pa.RecordBatch) -> None:
        self._writer.write_batch(batch)

    def close(self) -> None:
        self._writer.close()
        super().close()


class RawWriter(_Writer):
    """journalctl's short form: ``TIME LEVEL HOST rRANK LOGGER: MESSAGE`` (see the module docstring),
    flushed after every batch so a follow shows each record as it comes; levels coloured on a terminal."""

    def __init__(self, stream: IO[bytes], tz: tzinfo | None = None, color: bool = False) -> None:
        super().__init__(stream, tz)
        self.color = color

    def _write(self, batch: pa.RecordBatch) -> None:
        rows = text_timestamps(batch, self.tz).to_pylist()
        self.stream.write("".join(raw_line(row, self.color) for row in rows).encode("utf-8", "replace"))
        self.stream.flush()


def raw_line(row: dict[str, Any], color: bool = False) -> str:
    """One record in the raw form, newline-terminated (continuation lines indented)."""
    if set(row) <= set(RAW_COLUMNS) and "msg" in row:
        level = row.get("level") or ""
        if color and level in LEVEL_COLORS:
            level = f"\x1b[{LEVEL_COLORS[level]}m{level:<8}\x1b[0m"
        head = [row.get("ts"), level if color else f"{level:<8}" if level else None, row.get("host"),
                f"r{row['rank']}" if row.get("rank") is not None else None,
                f"{row['logger']}:" if row.get("logger") else None]
        text = "\n".join(part for part in (row.get("msg"), row.get("exc")) if part)
    else:
        head = [str(value) for name, value in row.items() if name not in ("msg", "exc") and value is not None]
        text = "\n".join(str(row[name]) for name in ("msg", "exc") if row.get(name))
    first, *rest = (text.rstrip("\n") or "").split("\n")
    line = " ".join(str(part) for part in (*head, first) if part not in (None, ""))
    return line + "\n" + "".join(f"  {more}\n" for more in rest)


class TableWriter(_Writer):
    """A rich table on the terminal (capped at `max_rows`; says how many rows it left out)."""

    def __init__(self, stream: IO[bytes], max_rows: int | None, tz: tzinfo | None = None) -> None:
        super().__init__(stream, tz)
        self.max_rows = max_rows
        self._rows: list[dict[str, Any]] = []
        self._columns: list[str] = []

    def _write(self, batch: pa.RecordBatch) -> None:
        self._columns = self._columns or batch.schema.names
        room = None if self.max_rows is None else self.max_rows - len(self._rows)
        if room is None or room > 0:
            self._rows.extend(text_timestamps(batch.slice(0, room), self.tz).to_pylist())

    def close(self) -> None:
        from rich.console import Console
        from rich.table import Table

        console = Console(file=sys.stdout, soft_wrap=False)
        if not self.rows:
            return  # the command says what was searched (on stderr)
        table = Table(show_lines=False, header_style="bold")
        styles = {"ERROR": "red", "CRITICAL": "bold red", "WARNING": "yellow", "DEBUG": "dim"}
        for name in self._columns:
            table.add_column(name, overflow="fold", no_wrap=name in ("ts", "level", "host", "rank", "pid", "step"),
                             min_width=30 if name in ("msg", "exc") else None)
        for row in self._rows:
            cells = ["" if row[name] is None else str(row[name]) for name in self._columns]
            table.add_row(*cells, style=styles.get(str(row.get("level"))))
        console.print(table)
        if self.rows > len(self._rows):
            console.print(f"more than {len(self._rows)} records (showing the first {len(self._rows)}; "
                          "use --count, --limit, --format or --output for all)")
        else:
            console.print(f"{self.rows} record{'s' if self.rows != 1 else ''}")


def make_writer(fmt: str, stream: IO[bytes], schema: pa.Schema, table_rows: int | None = TABLE_MAX_ROWS,
                tz: tzinfo | None = None, color: bool = False) -> _Writer:
    if fmt == "csv":
        return CsvWriter(stream, schema, tz)
    if fmt == "ndjson":
        return NdjsonWriter(stream, tz)
    if fmt == "json":
        return JsonWriter(stream, tz)
    if fmt == "parquet":
        return ParquetWriter(stream, schema)
    if fmt == "table":
        return TableWriter(stream, table_rows, tz)
    if fmt == "raw":
        return RawWriter(stream, tz, color)
    raise UserError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")


def export(batches: Any, schema: pa.Schema, fmt: str, path: str | None = None,
           table_rows: int | None = TABLE_MAX_ROWS, tz: tzinfo | None = None) -> int:
    """Write every batch to `path` (atomically) or stdout in `fmt`; returns the number of rows."""
    if path is None:
        if fmt == "parquet" and sys.stdout.isatty():
            raise UserError("refusing to write Parquet to a terminal: use --output x.parquet or a pipe")
        writer = make_writer(fmt, sys.stdout.buffer, schema, table_rows, tz, color=use_color())
        for batch in batches:
            writer.write_batch(batch)
        writer.close()
        return writer.rows
    with atomic_file(path, "wb") as stream:
        writer = make_writer(fmt, stream, schema, table_rows, tz)
        for batch in batches:
            writer.write_batch(batch)
        writer.close()
    return writer.rows


@contextlib.contextmanager
def atomic_file(path: str, mode: str = "w") -> Iterator[IO[Any]]:
    """`path` opened for writing so that it appears complete or not at all (a temp file beside it,
    renamed when the block succeeds, removed when it fails); errors are one ``--output`` line."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise UserError(f"--output {path}: directory {directory} does not exist")
    temp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with open(temp, mode, **({} if "b" in mode else {"encoding": "utf-8", "newline": ""})) as stream:
            yield stream
        os.replace(temp, path)
    except PermissionError:
        raise UserError(f"--output {path}: permission denied") from None
    finally:
        if os.path.exists(temp):
            os.unlink(temp)
