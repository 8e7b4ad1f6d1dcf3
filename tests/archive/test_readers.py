"""The archive is plain hive-partitioned Parquet that the tools people already have read as is.

A real archive service ingests a corpus over HTTP; queries build the derived indexes beside the data
(``_ranklog_index/``); then DuckDB (several natural globs, ``hive_partitioning=true``), Polars
(``scan_parquet`` with hive) and pyarrow datasets read the root and must give exactly the ingested
records: the same count and the same ``ts`` values to the microsecond (``TIMESTAMP(MICROS, UTC)``).
Spark is in test_readers_spark.py (slow: a JVM).
"""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from ranklog.archive_layout import INDEX_ROOT
from ranklog.query import engine
from ranklog.query.filters import QuerySpec
from ranklog.query.sources import open_source
from ranklog.record import ts_ns

from .conftest import PAST_NS
from .util import post_table, wait_rows

# Globs a user writes for "every Parquet file under the root" (DESIGN: derived data never matches).
DUCKDB_GLOBS = ("**/*.parquet", "*/*/*.parquet", "date=*/hour=*/*.parquet", "**")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table]:
    """(archive root written by the real archive service with its query indexes built, the corpus)."""
    from tests.helpers.archive_proc import running_archive
    from tests.helpers.corpus import generate

    base = tmp_path_factory.mktemp("readers")
    token_file = base / "tokens"
    token_file.write_text("readers-token\n")
    corpus = generate(6000, start_ns=PAST_NS, span_s=3 * 3600, hosts=2, ranks_per_host=4, seed=21)
    root = base / "archive"
    # an index as an older ranklog named it: it matched `**/*.parquet` and broke hive readers
    legacy = root / INDEX_ROOT / "severe" / f"date={pc.strftime(corpus['ts'][0], '%Y-%m-%d').as_py()}.parquet"
    legacy.parent.mkdir(parents=True)
    pq.write_table(pa.table({"unrelated": [1]}), legacy)
    flags = ["--archive-id", "r1", "--flush-interval", "200ms", "--compaction-delay", "0s", "--compaction-interval", "200ms"]
    with running_archive(root, token_file, extra_args=flags) as archive:
        for start in range(0, corpus.num_rows, 2000):
            post_table(archive, corpus.slice(start, 2000))
        wait_rows(root, corpus.num_rows)
        deadline = time.monotonic() + 60  # compacted hours get the severe row groups the severe index reads
        while any(len(list(hour.glob("*.parquet"))) != 1 for hour in root.glob("date=*/hour=*")):
            assert time.monotonic() < deadline, "closed hours were not compacted"
            time.sleep(0.2)
    source = open_source(archive=str(root))
    trace = pc.drop_null(corpus["trace_id"])[0].as_py()
    assert engine.count(source, QuerySpec(trace_ids=(trace,))) > 0  # builds the trace index
    assert engine.count(source, QuerySpec(contains="rror", levels=("ERROR", "CRITICAL"))) > 0  # severe
    kinds = {p.parent.name for p in (root / INDEX_ROOT).glob("*/date=*.rlindex")}
    assert kinds == {"trace", "severe"}, "the derived indexes must exist, or the test proves nothing"
    assert not legacy.exists(), "an index named the old way (…/*.parquet) is deleted"
    return root, corpus


def _expected_ts(corpus: pa.Table) -> list[int]:
    return sorted((ts_ns(corpus["ts"]) // 1000).tolist())


@pytest.mark.parametrize("glob", DUCKDB_GLOBS)
def test_duckdb_reads_every_natural_glob(written, glob):
    import duckdb

    root, corpus = written
    pattern = f"{root}/{glob}" if glob != "**" else f"{root}/**/*.parquet"
    connection = duckdb.connect()
    relation = f"read_parquet('{pattern}', hive_partitioning=true)"
    (count, hosts), = connection.execute(f"SELECT count(*), count(DISTINCT host) FROM {relation}").fetchall()
    assert (count, hosts) == (corpus.num_rows, 2)
    types = dict(connection.execute(f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM {relation})").fetchall())
    assert types["ts"] == "TIMESTAMP WITH TIME ZONE" and "date" in types and "hour" in types
    micros = [row[0] for row in connection.execute(f"SELECT epoch_us(ts) FROM {relation} ORDER BY 1").fetchall()]
    assert micros == _expected_ts(corpus)
    # ordering within a microsecond stays exact with seq / offset
    keys = connection.execute(f'SELECT source_id, "offset" FROM {relation} ORDER BY ts, source_id, "offset"').fetchall()
    assert len(set(keys)) == corpus.num_rows


def test_duckdb_hive_columns_match_ts(written):
    import duckdb

    root, _ = written
    mismatched = duckdb.connect().execute(
        f"SELECT count(*) FROM read_parquet('{root}/**/*.parquet', hive_partitioning=true) "
        "WHERE strftime(ts AT TIME ZONE 'UTC', '%Y-%m-%d') <> CAST(date AS VARCHAR) "
        "OR hour(ts AT TIME ZONE 'UTC') <> CAST(hour AS INTEGER)").fetchone()[0]
    assert mismatched == 0


def test_polars_scan_parquet_with_hive(written):
    import polars as pl

    root, corpus = written
    frame = pl.scan_parquet(f"{root}/**/*.parquet", hive_partitioning=True).collect()
    assert frame.height == corpus.num_rows
    assert str(frame.schema["ts"]) == "Datetime(time_unit='us', time_zone='UTC')"
    assert sorted(frame["ts"].dt.epoch("us").to_list()) == _expected_ts(corpus)
    assert set(frame.columns) >= {"date", "hour", "msg", "seq", "offset"}


def test_pyarrow_dataset_with_hive_partitioning(written):
    root, corpus = written
    dataset = ds.dataset(str(root), format="parquet", partitioning="hive")
    assert all("_ranklog" not in path for path in dataset.files)
    table = dataset.to_table()
    assert table.num_rows == corpus.num_rows and table.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert sorted((ts_ns(table["ts"]) // 1000).tolist()) == _expected_ts(corpus)


# Spark SQL DDL documented in docs/archive.md ("Reading the archive with other tools"); run here as written.
SPARK_DDL = ("CREATE TABLE ranklog_logs USING parquet LOCATION '{root}'",
             "MSCK REPAIR TABLE ranklog_logs")  # registers the date=/hour= partitions (again as new hours appear)


@pytest.mark.slow
def test_spark_reads_the_archive_and_its_table_ddl(written, tmp_path):
    """pyspark in local mode on Debian's OpenJDK: Spark >= 3.2 refuses Parquet TIMESTAMP(NANOS)
    (SPARK-40819), so this is what proves `ts` is stored in a unit it reads."""
    from pyspark.sql import SparkSession

    root, corpus = written
    spark = (SparkSession.builder.master("local[1]").appName("ranklog-readers")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.enabled", "false").config("spark.sql.session.timeZone", "UTC")
             .config("spark.sql.warehouse.dir", str(tmp_path / "warehouse"))
             .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={tmp_path}")
             .getOrCreate())
    try:
        frame = spark.read.parquet(str(root))
        assert frame.count() == corpus.num_rows
        types = dict(frame.dtypes)
        assert types["ts"] == "timestamp" and types["date"] == "date" and types["hour"] == "int"
        micros = sorted(row[0] for row in frame.selectExpr("unix_micros(ts)").collect())
        assert micros == _expected_ts(corpus)
        for statement in SPARK_DDL:
            spark.sql(statement.format(root=root))
        (count, hours), = spark.sql("SELECT count(*), count(DISTINCT date, hour) FROM ranklog_logs").collect()
        assert count == corpus.num_rows and hours == len(list(root.glob("date=*/hour=*")))
    finally:
        spark.stop()
