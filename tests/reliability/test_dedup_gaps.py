"""Exact dedup (issue 20): a record whose offset falls in the gap of an earlier batch is stored, not
answered "duplicate"; re-sends of everything are still duplicates. Real archive process, NDJSON
bodies with their own (source_id, offset) keys, and Arrow bodies declaring spans like the agent's."""

from __future__ import annotations

import json
import time

import httpx
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

from tests.helpers.archive_proc import ARROW, NDJSON, running_archive
from tests.reliability.report import Row

pytestmark = pytest.mark.slow
TS = "2026-12-02T13:04:05.123456Z"


def _line(source_id: str, offset: int) -> str:
    return json.dumps({"ts": TS, "msg": f"{source_id}@{offset}", "host": "n1", "source": "/x.log",
                       "source_id": source_id, "offset": offset})


def _post(client, archive, lines: list[str]) -> dict:
    answer = client.post(f"{archive.url}/v1/ingest", content="\n".join(lines).encode(), headers=archive.headers(NDJSON))
    assert answer.status_code == 200, answer.text
    return answer.json()


def _arrow(client, archive, source_id: str, offsets: list[int], span: tuple[int, int]) -> dict:
    rows = pa.table({"ts": pa.array([1_796_220_000_000_000_000] * len(offsets), pa.timestamp("ns", tz="UTC")),
                     "level": ["INFO"] * len(offsets), "msg": [f"{source_id}@{o}" for o in offsets],
                     "host": ["n1"] * len(offsets), "ip": [""] * len(offsets), "source": ["/y.log"] * len(offsets),
                     "source_id": [source_id] * len(offsets), "offset": pa.array(offsets, pa.int64()),
                     "format": ["text"] * len(offsets)})
    schema = rows.schema.with_metadata({b"ranklog.spans": json.dumps([[source_id, *span]])})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_table(rows.replace_schema_metadata(schema.metadata))
    answer = client.post(f"{archive.url}/v1/ingest", content=sink.getvalue().to_pybytes(), headers=archive.headers(ARROW))
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_gap_record_is_stored_and_resends_stay_duplicates(tmp_path, token_file, record_row):
    with running_archive(tmp_path / "archive", token_file, extra_args=("--flush-interval", "200ms")) as archive, \
            httpx.Client(timeout=30) as client:
        answers = [
            _post(client, archive, [_line("s", 0), _line("s", 1000)]),   # one batch: 0 and 1000
            _post(client, archive, [_line("s", 500)]),                   # the gap record
            _post(client, archive, [_line("s", 0), _line("s", 500), _line("s", 1000)]),  # a re-send of all
            _arrow(client, archive, "f", [0, 120, 240], (0, 360)),       # an agent chunk, span declared
            _arrow(client, archive, "f", [0, 120, 240], (0, 360)),       # its re-send
            _post(client, archive, [_line("f", 360)]),                   # the next line, just past the span
        ]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            files = list(archive.root.glob("date=*/hour=*/*.parquet"))
            table = ds.dataset([str(f) for f in files], format="parquet").to_table(columns=["source_id", "offset"]) \
                if files else None
            if table is not None and table.num_rows >= 7:
                break
            time.sleep(0.3)
    keys = sorted(zip(table["source_id"].to_pylist(), table["offset"].to_pylist(), strict=True))
    expected = [("f", 0), ("f", 120), ("f", 240), ("f", 360), ("s", 0), ("s", 500), ("s", 1000)]
    lost = len(set(expected) - set(keys))
    duplicated = len(keys) - len(set(keys))
    record_row(Row("exact dedup: a gap record", "keys s@0 and s@1000 in one batch, then s@500 (in their gap), then "
                   "all three re-sent; an agent-style Arrow chunk declaring its span [0, 360) sent twice, then f@360",
                   "archived keys = the 7 distinct keys; answers: the gap record accepted, re-sends all duplicates",
                   written=len(expected), archived=len(keys), lost=lost, duplicated=duplicated,
                   notes="answers " + ", ".join(f"{a['accepted']}/{a['duplicates']}" for a in answers)
                         + " (accepted/duplicates)"))
    assert [(a["accepted"], a["duplicates"]) for a in answers] == [(2, 0), (1, 0), (0, 3), (3, 0), (0, 3), (1, 0)]
    assert keys == expected
    assert pc.count_distinct(table["offset"]).as_py() >= 4
