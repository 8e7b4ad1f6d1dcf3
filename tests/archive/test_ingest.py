"""Ingest over real HTTP: every column round-trips, schema rules, NDJSON mapping, encodings."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ranklog.archive_layout import HOUR_NS, partition_dir
from ranklog.record import FIELDS, arrow_schema, format_ts
from tests.helpers.archive_proc import NDJSON, arrow_body, read_archive

from .conftest import PAST_NS
from .util import by_key, post, post_table, wait_rows


def test_every_column_round_trips(start_archive, small_corpus, tmp_path):
    archive = start_archive()  # default flush interval (1 s)
    assert post_table(archive, small_corpus.slice(0, 2500)) == {"accepted": 2500, "duplicates": 0}
    assert wait_rows(archive.root, 2500, timeout=5.0).num_rows == 2500  # queryable within 5 s of the ACK
    assert post_table(archive, small_corpus.slice(2500), compression="lz4") == {"accepted": 1500, "duplicates": 0}
    stored = wait_rows(archive.root, small_corpus.num_rows)
    assert stored.num_rows == small_corpus.num_rows
    assert by_key(stored).equals(by_key(small_corpus.cast(arrow_schema())))
    # Hive layout by UTC hour of ts, own archive id, no temp files visible.
    files = sorted(archive.root.glob("date=*/hour=*/*.parquet"))
    assert {f.parent.relative_to(archive.root).as_posix() for f in files} == {
        partition_dir(PAST_NS // HOUR_NS), partition_dir(PAST_NS // HOUR_NS + 1)}
    assert all(f.name.startswith("t1-") for f in files)
    assert not list(archive.root.glob("date=*/hour=*/.*"))
    # Each file: zstd, statistics, dictionary for low-cardinality columns, delta-encoded ts.
    meta = pq.ParquetFile(files[0]).metadata
    column = meta.row_group(0).column(FIELDS.index("level"))
    assert column.compression == "ZSTD" and column.statistics is not None
    assert "RLE_DICTIONARY" in meta.row_group(0).column(FIELDS.index("host")).encodings
    assert "DELTA_BINARY_PACKED" in meta.row_group(0).column(FIELDS.index("ts")).encodings


def test_missing_nullable_columns_and_level_spellings(start_archive):
    archive = start_archive()
    table = pa.table({
        "ts": pa.array([PAST_NS, PAST_NS + 10**9], pa.timestamp("ns", tz="UTC")),
        "level": ["warn", "E"], "msg": ["a", "b"], "host": ["h", "h"], "ip": ["10.0.0.1"] * 2,
        "source": ["/x"] * 2, "source_id": pa.array(["s1", "s1"]).dictionary_encode(),
        "offset": pa.array([0, 10], pa.int64()), "format": ["text"] * 2,
    })
    assert post_table(archive, table) == {"accepted": 2, "duplicates": 0}
    stored = wait_rows(archive.root, 2)
    assert stored["level"].to_pylist() == ["ERROR", "WARNING"] or sorted(stored["level"].to_pylist()) == [
        "ERROR", "WARNING"]
    assert stored["rank"].null_count == 2 and stored["attrs"].null_count == 2


def test_schema_violations_are_400_naming_the_column(start_archive, small_corpus):
    archive = start_archive()
    extra = small_corpus.slice(0, 5).append_column("gpu_temp", pa.array([1.0] * 5))
    answer = post(archive, arrow_body(extra))
    assert answer.status_code == 400 and "gpu_temp" in answer.json()["error"]
    missing = small_corpus.slice(0, 5).drop_columns(["source_id"])
    answer = post(archive, arrow_body(missing))
    assert answer.status_code == 400 and "source_id" in answer.json()["error"]
    wrong = small_corpus.slice(0, 5).set_column(FIELDS.index("offset"), "offset", pa.array(["x"] * 5))
    answer = post(archive, arrow_body(wrong))
    assert answer.status_code == 400 and "offset" in answer.json()["error"]
    answer = post(archive, b"definitely not arrow")
    assert answer.status_code == 400 and answer.json()["error"]
    answer = post(archive, b"{}", content_type="text/csv")
    assert answer.status_code == 415
    assert read_archive(archive.root).num_rows == 0


def test_unusable_values_keep_their_records(start_archive, small_corpus):
    """Issue 20: values never refuse a batch; nulls in a required column take its default."""
    archive = start_archive("--flush-interval", "200ms")
    nulls = small_corpus.slice(0, 5).set_column(FIELDS.index("host"), "host", pa.nulls(5, pa.string()))
    assert post(archive, arrow_body(nulls)).json() == {"accepted": 5, "duplicates": 0}
    far = small_corpus.slice(5, 3).set_column(FIELDS.index("ts"), "ts", pa.array([0, 32_485_190_400, None], pa.timestamp("s")))
    assert post(archive, arrow_body(far)).json() == {"accepted": 3, "duplicates": 0, "repaired": 1}
    stored = wait_rows(archive.root, 8)
    assert stored["host"].to_pylist().count("unknown") == 5
    attrs = [json.loads(a) for a in stored["attrs"].to_pylist() if a and "parse_error" in a]
    assert [(a["ts"], a["parse_error"]) for a in attrs] == [("2999-06-01T00:00:00Z", "unusable value in: ts")]
    assert attrs[0]["ts_inferred"] in ("previous", "next", "received")  # rows of other sources around it


def test_gzip_and_zstd_content_encoding(start_archive, small_corpus):
    archive = start_archive("--flush-interval", "200ms")
    gz = gzip.compress(arrow_body(small_corpus.slice(0, 100), compression=None))
    assert post(archive, gz, **{"Content-Encoding": "gzip"}).json() == {"accepted": 100, "duplicates": 0}
    zstd = pa.compress(arrow_body(small_corpus.slice(100, 100), compression=None), codec="zstd", asbytes=True)
    assert post(archive, zstd, **{"Content-Encoding": "zstd"}).json() == {"accepted": 100, "duplicates": 0}
    frame = pa.BufferOutputStream()
    with pa.CompressedOutputStream(frame, "zstd") as out:
        out.write(arrow_body(small_corpus.slice(200, 100), compression=None))
    assert post(archive, frame.getvalue().to_pybytes(), **{"Content-Encoding": "zstd"}).json() == {
        "accepted": 100, "duplicates": 0}
    assert post(archive, b"\x1f\x8b garbage", **{"Content-Encoding": "gzip"}).status_code == 400
    assert post(archive, b"x", **{"Content-Encoding": "br"}).status_code == 415
    assert wait_rows(archive.root, 300).num_rows == 300


def test_ndjson_mapping_and_derived_keys(start_archive):
    archive = start_archive("--flush-interval", "200ms")
    lines = [
        {"ts": format_ts(PAST_NS + 1_500_000_000), "level": "warn", "msg": "disk slow", "host": "n1", "ip": "10.0.0.1",
         "rank": 3, "source": "/var/log/a.jsonl", "source_id": "fid-a", "offset": 0, "gpu": 7},
        {"timestamp": PAST_NS / 1e9 + 2.25, "severity": "ERROR", "message": "boom", "host": "n1", "rank": "x"},
        {"log": "plain line from fluent-bit", "kubernetes": {"pod": "p-1"}},
    ]
    body = ("\n".join(json.dumps(line) for line in lines) + "\n").encode()
    assert post(archive, body, content_type=NDJSON).json() == {"accepted": 3, "duplicates": 0, "repaired": 1}
    # A shipper retrying the same batch: all duplicates (keyed line by its key, others by body hash).
    assert post(archive, body, content_type=NDJSON).json() == {"accepted": 0, "duplicates": 3, "repaired": 1}
    # The keyed line inside another batch is still a duplicate; the new line is not.
    again = (json.dumps(lines[0]) + "\n" + json.dumps({"msg": "new"}) + "\n").encode()
    assert post(archive, again, content_type=NDJSON + "; charset=utf-8").json() == {"accepted": 1, "duplicates": 1}
    stored = wait_rows(archive.root, 4).sort_by("ts")
    micros = stored.set_column(0, "ts", pc.cast(stored["ts"], pa.timestamp("us", tz="UTC"), safe=False))
    rows = {row["msg"]: row for row in micros.to_pylist()}
    first = rows["disk slow"]
    assert first["level"] == "WARNING" and first["rank"] == 3 and first["source_id"] == "fid-a"
    assert json.loads(first["attrs"]) == {"gpu": 7}
    second = rows["boom"]
    assert second["level"] == "ERROR" and second["rank"] is None and json.loads(second["attrs"]) == {
        "rank": "x", "parse_error": "unusable value in: rank"}
    assert abs(second["ts"].timestamp() - (PAST_NS / 1e9 + 2.25)) < 1e-5
    assert second["source_id"].startswith("ndjson-body:") and second["offset"] == 1
    third = rows["plain line from fluent-bit"]
    assert third["host"] == "unknown" and third["format"] == "json" and third["level"] == "UNKNOWN"
    # no time: the nearest earlier record of its source (the body) gives one, marked
    assert json.loads(third["attrs"]) == {"kubernetes": {"pod": "p-1"}, "ts_inferred": "previous"}
    assert third["ts"] == second["ts"]
    assert post(archive, b'{"msg": 1}\n[1,2]\n', content_type=NDJSON).status_code == 400
    assert post(archive, b'{"msg": "x"\n', content_type=NDJSON).status_code == 400
    assert pc.sum(pc.equal(stored["msg"], "new")).as_py() == 1
