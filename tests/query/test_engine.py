"""Every filter, against an archive and against a raw log directory holding the same records.

Each answer is compared three ways: archive == raw directory (whole tables, every column), and
both == an independent row-by-row Python reading of the spec (tests/query/reference.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ranklog.query import engine
from ranklog.query.filters import QuerySpec
from ranklog.query.sources import open_source
from tests.query.conftest import START_NS
from tests.query.reference import expected_keys, keys_of

HOUR = 3600 * 10**9


def _first(table: pa.Table, column: str):
    return pc.drop_null(table[column])[0].as_py()


def _specs(parsed: pa.Table) -> dict[str, QuerySpec]:
    trace = _first(parsed, "trace_id")
    pid = _first(parsed, "pid")
    ip = _first(parsed.filter(pc.equal(parsed["host"], "gpu-node-001")), "ip")
    steps = sorted(pc.drop_null(parsed["step"]).to_pylist())
    attrs = json.loads(_first(parsed.filter(pc.match_substring(parsed["attrs"], '"tp"')), "attrs"))
    return {
        "everything": QuerySpec(),
        "reference window": QuerySpec(start_ns=START_NS, end_ns=START_NS + 4 * HOUR, levels=("ERROR", "CRITICAL")),
        "mid-hour window": QuerySpec(start_ns=START_NS + HOUR // 3, end_ns=START_NS + HOUR + HOUR // 7),
        "exact levels": QuerySpec(levels=("WARNING", "UNKNOWN")),
        "hosts": QuerySpec(hosts=("gpu-node-000", "gpu-node-002")),
        "host glob": QuerySpec(hosts=("gpu-node-00[12]",)),
        "ip": QuerySpec(ips=(ip,)),
        "pid": QuerySpec(pids=(pid,)),
        "ranks": QuerySpec(ranks=(0, 1, 2, 3, 7)),
        "job": QuerySpec(jobs=(_first(parsed, "job"),)),
        "trace": QuerySpec(trace_ids=(trace,)),
        "loggers": QuerySpec(loggers=("torch.distributed", "verl.utils.*")),
        "steps": QuerySpec(step_min=steps[len(steps) // 4], step_max=steps[len(steps) // 2]),
        "contains": QuerySpec(contains="CUDA out of memory"),
        "contains in exc": QuerySpec(contains="dp_actor.py"),
        "contains ignore case": QuerySpec(contains="watchdog CAUGHT", ignore_case=True),
        "regex": QuerySpec(regex=r"WorkNCCL\(SeqNum=\d+, OpType=ALLREDUCE"),
        "attr value": QuerySpec(attrs=(f"tp={attrs['tp']}",)),
        "attr key": QuerySpec(attrs=("shard",)),
        "newest first with limit": QuerySpec(order=("-ts",), limit=25),
        "by host then time": QuerySpec(order=("host", "ts"), levels=("CRITICAL",)),
        "limit": QuerySpec(limit=7, ranks=(5,)),
        "combined": QuerySpec(start_ns=START_NS - HOUR, hosts=("gpu-node-001",), levels=("ERROR", "CRITICAL"),
                              regex="CUDA|NCCL", ranks=(4, 5, 6, 7)),
        "empty": QuerySpec(contains="no such text anywhere 7f3a"),
        "empty window": QuerySpec(start_ns=START_NS + 400 * HOUR, end_ns=START_NS + 401 * HOUR),
    }


SPEC_NAMES = [
    "everything", "reference window", "mid-hour window", "exact levels", "hosts", "host glob", "ip", "pid", "ranks",
    "job", "trace", "loggers", "steps", "contains", "contains in exc", "contains ignore case", "regex", "attr value",
    "attr key", "newest first with limit", "by host then time", "limit", "combined", "empty", "empty window"]


@pytest.fixture(scope="module")
def sources(archive_root: Path, raw_dir: Path):
    return open_source(archive=str(archive_root)), open_source(log_dir=str(raw_dir))


@pytest.mark.parametrize("name", SPEC_NAMES)
def test_archive_and_raw_dir_agree_with_reference(name, parsed, sources):
    spec = _specs(parsed)[name]
    archive, raw = sources
    from_archive = engine.read(archive, spec)
    from_raw = engine.read(raw, spec)
    expected = expected_keys(parsed, spec)
    assert keys_of(from_archive) == expected
    assert from_archive.equals(from_raw), f"{name}: archive and raw directory differ"
    assert engine.count(archive, spec) == len(expected)
    if name not in ("empty", "empty window"):
        assert expected, f"{name}: the corpus should hold matches (the test would prove nothing)"


def test_column_selection_and_streaming_batches(parsed, sources):
    archive, _ = sources
    batches = list(engine.scan(archive, QuerySpec(), ["ts", "msg"]))
    assert batches and all(batch.num_rows <= engine.BATCH_ROWS for batch in batches)  # streamed, bounded
    unordered = list(engine.scan(archive, QuerySpec(order=()), ["ts", "msg"]))
    assert len(unordered) > 1  # storage order: batch by batch as files are read
    assert all(batch.schema.names == ["ts", "msg"] for batch in batches)
    assert sum(batch.num_rows for batch in batches) == parsed.num_rows
    empty = engine.read(archive, QuerySpec(contains="no such text 7f3a"), ["ts", "level"])
    assert empty.num_rows == 0 and empty.schema.names == ["ts", "level"]


def test_unknown_column_is_a_user_error(sources):
    from ranklog.errors import UserError

    with pytest.raises(UserError, match="unknown column"):
        engine.read(sources[0], QuerySpec(), ["ts", "mesage"])


@pytest.mark.parametrize("extension", ["csv", "json", "ndjson", "parquet"])
def test_every_output_is_identical_from_both_sources(extension, sources, tmp_path):
    from ranklog.query.outputs import export, format_for_path
    from ranklog.record import arrow_schema

    spec = QuerySpec(start_ns=START_NS, end_ns=START_NS + 2 * HOUR, levels=("WARNING", "ERROR", "CRITICAL"))
    written = []
    for source, name in zip(sources, ("archive", "raw"), strict=True):
        path = tmp_path / f"{name}.{extension}"
        rows = export(engine.scan(source, spec), arrow_schema(), format_for_path(str(path)), str(path))
        written.append((rows, path.read_bytes()))
    assert written[0][0] > 0
    if extension == "parquet":
        import pyarrow.parquet as pq

        assert pq.read_table(tmp_path / "archive.parquet").equals(pq.read_table(tmp_path / "raw.parquet"))
    else:
        assert written[0] == written[1]
