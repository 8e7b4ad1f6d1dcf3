"""Every output format round-trips the records it was given (values, nulls, multi-line text)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from ranklog.errors import UserError
from ranklog.query.outputs import export, format_for_path, json_lines, make_writer
from ranklog.record import arrow_schema, format_ts, rows_to_table, ts_ns

ROWS = [
    {"ts": 1_759_305_600_123_456_000, "level": "ERROR", "msg": 'boom "quoted"\nsecond line\ttab', "host": "h1",
     "ip": "10.0.0.1", "source": "/l/a", "source_id": "1:2:3", "offset": 0, "format": "python", "pid": 7,
     "rank": 3, "exc": "Traceback (most recent call last):\n  x\nValueError: ü", "attrs": {"k": 1}},
    {"ts": 1_759_305_601_000_000_000, "level": "INFO", "msg": "ctrl \x01 bell \x07 and \u2028 sep", "host": "h2",
     "ip": "10.0.0.2", "source": "/l/b", "source_id": "4:5:6", "offset": 120, "format": "text", "step": 12},
]


@pytest.fixture
def table() -> pa.Table:
    return rows_to_table(ROWS)


def _export(table: pa.Table, path: Path) -> int:
    return export(iter(table.to_batches(max_chunksize=1)), table.schema, format_for_path(str(path)), str(path))


def _as_text_rows(table: pa.Table) -> list[dict]:
    rows = table.drop_columns(["ts"]).to_pylist()
    for row, ns in zip(rows, ts_ns(table["ts"]).tolist(), strict=True):
        row["ts"] = format_ts(ns)
    return rows


def test_ndjson_and_json_round_trip(table, tmp_path):
    expected = _as_text_rows(table)
    assert _export(table, tmp_path / "out.ndjson") == 2
    lines = (tmp_path / "out.ndjson").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == expected
    assert _export(table, tmp_path / "out.json") == 2
    assert json.loads((tmp_path / "out.json").read_text(encoding="utf-8")) == expected


def test_vectorized_json_matches_json_module(table):
    for line, row in zip(json_lines(table.to_batches()[0]).to_pylist(), _as_text_rows(table), strict=True):
        assert json.loads(line) == row


def test_csv_round_trip(table, tmp_path):
    _export(table, tmp_path / "out.csv")
    back = pacsv.read_csv(tmp_path / "out.csv", convert_options=pacsv.ConvertOptions(
        column_types={name: pa.string() for name in table.column_names}, strings_can_be_null=False))
    expected = _as_text_rows(table)
    for row, want in zip(back.to_pylist(), expected, strict=True):
        assert row == {k: "" if v is None else str(v) for k, v in want.items()}


def test_parquet_round_trip(table, tmp_path):
    _export(table, tmp_path / "out.parquet")
    assert pq.read_table(tmp_path / "out.parquet").equals(table)


def test_empty_results_are_valid_files(tmp_path):
    empty = arrow_schema().empty_table()
    assert _export(empty, tmp_path / "e.json") == 0
    assert json.loads((tmp_path / "e.json").read_text()) == []
    _export(empty, tmp_path / "e.csv")
    assert (tmp_path / "e.csv").read_text().startswith('"ts","level","msg"')
    _export(empty, tmp_path / "e.parquet")
    assert pq.read_table(tmp_path / "e.parquet").num_rows == 0


def test_failed_export_leaves_no_file(table, tmp_path):
    def broken():
        yield table.to_batches()[0]
        raise OSError("disk went away")

    with pytest.raises(OSError):
        export(broken(), table.schema, "csv", str(tmp_path / "x.csv"))
    assert list(tmp_path.iterdir()) == []


def test_format_by_extension_and_errors(tmp_path):
    assert format_for_path("a.JSONL") == "ndjson"
    assert format_for_path("dir/x.pq") == "parquet"
    with pytest.raises(UserError, match="unknown extension"):
        format_for_path("x.xlsx")
    with pytest.raises(UserError, match="does not exist"):
        export(iter(()), arrow_schema(), "csv", str(tmp_path / "missing" / "x.csv"))


def test_table_writer_caps_rows(table, capsys):
    writer = make_writer("table", io.BytesIO(), table.schema, table_rows=1)
    for batch in table.to_batches():
        writer.write_batch(batch)
    writer.close()
    out = capsys.readouterr().out
    assert "more than 1 records (showing the first 1" in out and "h1" in out and "h2" not in out
