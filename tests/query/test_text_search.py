"""The message-search fast path (ranklog.query.text_search) answers exactly like a plain dataset scan.

The reference is pyarrow.dataset filtering the same files with the spec's own expression (the path
the engine takes for every other filter). The archive here is built to trip a prefilter: literals
split across two adjacent messages, matches only in the exception text, null and empty texts,
unicode, RE2's case folding (KELVIN SIGN), anchors over multi-line messages, a literal so common
the prefilter gives up, several row groups per file, and a file written without the ``exc`` column.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from ranklog.query import engine
from ranklog.query.filters import QuerySpec
from ranklog.query.literals import required_literals
from ranklog.query.sources import open_source
from ranklog.query.text_search import MAX_CANDIDATE_FRACTION, search_literals
from ranklog.record import arrow_schema, records_table

HOUR_NS = 3600 * 10**9
START_NS = 1_759_305_600 * 10**9  # 2025-10-01T08:00:00Z
WATCHDOG = "Watchdog caught collective operation timeout: WorkNCCL(SeqNum={}, OpType={}, Timeout(ms)=600000)"
TEXTS: list[tuple[str, str | None]] = [
    (WATCHDOG.format(12, "ALLGATHER"), None),
    (WATCHDOG.format(13, "ALLREDUCE"), None),
    ("the next message ends the word: Watch", None),  # a literal split across two values
    ("dog caught collective operation timeout: WorkNCCL(SeqNum=14, OpType=ALLGATHER", None),
    ("step failed", "Traceback (most recent call last):\n  " + WATCHDOG.format(15, "ALLGATHER")),
    ("step failed again", None),
    ("", None),
    ("", "RuntimeError: CUDA error: an illegal memory access was encountered"),
    ("Ünïcödé ✓ naïve café", "ValueError: Ωmega ≠ alpha"),
    ("temperature 300 \u212a reached", None),  # KELVIN SIGN: RE2 folds it with k/K under (?i)
    ("temperature 300 k reached", None),
    ("first line\n" + WATCHDOG.format(16, "ALLGATHER"), None),
    ("  " + WATCHDOG.format(17, "BROADCAST"), "torch.distributed.DistBackendError: NCCL error"),
    ("grad_norm is not finite: nan", None),
]
COMMON = 200  # heartbeat rows: a literal in far more than MAX_CANDIDATE_FRACTION of the rows


def _records(texts: list[tuple[str, str | None]], first_offset: int, host: str) -> list[dict]:
    rows = []
    for i, (msg, exc) in enumerate(texts):
        rows.append({
            "ts": START_NS + (first_offset + i) * 10**9, "level": "ERROR" if exc else "INFO", "msg": msg, "exc": exc,
            "host": host, "ip": "10.0.0.1", "rank": i % 4, "source": f"/logs/{host}.log", "source_id": host,
            "offset": (first_offset + i) * 100, "format": "text",
        })
    return rows


def _hour_dir(root: Path) -> Path:
    path = root / "date=2025-10-01" / "hour=08"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("search-archive")
    heartbeats = [(f"INFO heartbeat ok {i}", None) for i in range(COMMON)]
    first = _records(TEXTS + heartbeats + TEXTS, 0, "gpu-node-000")
    # several small row groups, so matches sit in some groups and not others
    pq.write_table(records_table(first), _hour_dir(root) / "t1-1.parquet",
                   row_group_size=9, compression="zstd")
    second = records_table(_records(TEXTS, 10_000, "gpu-node-001"))
    pq.write_table(second.drop_columns(["exc"]), _hour_dir(root) / "t1-2.parquet")  # an older file without exc
    return root


SPECS = {
    "literal regex": QuerySpec(regex=r"WorkNCCL\(SeqNum=[0-9]+, OpType=ALLGATHER"),
    "long literal": QuerySpec(regex=r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=\d+"),
    "anchored": QuerySpec(regex=r"^Watchdog caught"),
    "anchored end": QuerySpec(regex=r"café$"),
    "alternation": QuerySpec(regex="CUDA error|OpType=ALLGATHER"),
    "group literal": QuerySpec(regex="(Watchdog) caught"),
    "ignore case": QuerySpec(regex="300 k", ignore_case=True),
    "inline flag": QuerySpec(regex="(?i)WATCHDOG CAUGHT"),
    "unicode": QuerySpec(regex="naïve.caf"),
    "exc only": QuerySpec(regex=r"Ωmega ≠"),
    "common literal": QuerySpec(regex=r"heartbeat ok \d+"),
    "no literal": QuerySpec(regex=r"\d{3} .* reached"),
    "contains": QuerySpec(contains="OpType=ALLGATHER"),
    "contains ignore case": QuerySpec(contains="watchdog CAUGHT", ignore_case=True),
    "contains and regex": QuerySpec(contains="SeqNum=1", regex="ALLGATHER|BROADCAST"),
    "with other filters": QuerySpec(regex="OpType", levels=("ERROR",), hosts=("gpu-node-00[01]",), ranks=(0, 1)),
    "time window": QuerySpec(regex="WorkNCCL", start_ns=START_NS + 5 * 10**9, end_ns=START_NS + 230 * 10**9),
    "descending with limit": QuerySpec(regex="caught", order=("-ts",), limit=3),
    "nothing": QuerySpec(regex="no such text 7f3a"),
}


def _reference(root: Path, spec: QuerySpec) -> pa.Table:
    """The same spec through a plain pyarrow.dataset scan of every file."""
    files = sorted(str(p) for p in root.rglob("*.parquet"))
    table = ds.dataset(files, schema=arrow_schema(), format="parquet").to_table(filter=spec.expression())
    table = table.sort_by(engine.sort_keys(spec)) if spec.order else table
    return table if spec.limit is None else table.slice(0, spec.limit)


@pytest.mark.parametrize("name", list(SPECS))
def test_search_answers_like_a_dataset_scan(name: str, archive: Path):
    spec = SPECS[name]
    source = open_source(archive=str(archive))
    found = engine.read(source, spec)
    expected = _reference(archive, spec)
    assert found.equals(expected), f"{name}: {found.num_rows} rows, expected {expected.num_rows}"
    assert engine.count(source, spec) == expected.num_rows
    narrow = engine.read(source, spec, ["offset", "host", "msg"])
    assert narrow.equals(expected.select(["offset", "host", "msg"]))
    if name != "nothing":
        assert expected.num_rows, f"{name}: the archive should hold matches (the test would prove nothing)"


def test_the_tricky_cases_are_exercised(archive: Path):
    """The archive really holds what the cases above rely on."""
    source = open_source(archive=str(archive))
    split = engine.read(source, QuerySpec(regex=r"Watchdog caught.*SeqNum=14"))
    assert split.num_rows == 0  # "Watch" + "dog caught…" in two rows is no match
    kelvin = engine.read(source, SPECS["ignore case"], ["msg"]).column("msg").to_pylist()
    assert any("\u212a" in text for text in kelvin) and any(" k " in text for text in kelvin)
    heartbeat = max(search_literals(SPECS["common literal"]), key=len)
    assert heartbeat == b"heartbeat ok " and COMMON > 64 and COMMON / (COMMON + 2 * len(TEXTS)) > MAX_CANDIDATE_FRACTION
    assert pq.ParquetFile(next(archive.rglob("t1-1.parquet"))).metadata.num_row_groups > 10


@pytest.mark.parametrize(("pattern", "expected"), [
    (r"WorkNCCL\(SeqNum=[0-9]+, OpType=ALLGATHER", ["WorkNCCL(SeqNum=", ", OpType=ALLGATHER"]),
    ("ab*c", ["a", "c"]),
    ("colou?r", ["colo", "r"]),
    ("x+yz", ["yz"]),
    (r"a{2,3}bc", ["bc"]),
    (r"^abc$", ["abc"]),
    (r"foo(bar|baz)qux", ["foo", "qux"]),
    (r"\p{Greek}abc\pN", ["abc"]),
    (r"[[:alpha:]]xyz[]a]", ["xyz"]),
    (r"\x{41}\x41end", ["end"]),
    (r"a\.b\d", ["a.b"]),
    ("é+ü", ["ü"]),
    ("CUDA|NCCL", []),
    ("(?i)abc", []),
    ("a(?i)bc", []),
    (r"\Qa.b\E", []),
    ("x{,3}", []),
    ("a{", []),
    ("(unclosed", []),
    ("[unclosed", []),
    (r"\1", []),
])
def test_required_literals(pattern: str, expected: list[str]):
    assert sorted(required_literals(pattern)) == sorted(expected)
    assert required_literals(pattern, ignore_case=True) == []


def test_required_literals_are_in_every_match():
    """Soundness on patterns both RE2 and Python's re read alike: a match always holds every literal."""
    texts = [msg for msg, _ in TEXTS] + [exc for _, exc in TEXTS if exc] + ["abc", "abbbc", "ac", "color", "colour",
                                                                             "xxyz", "a.b7", "foobazqux"]
    patterns = [r"WorkNCCL\(SeqNum=[0-9]+, OpType=ALLGATHER", "ab*c", "colou?r", "x+yz", r"a\.b\d", "foo(bar|baz)qux",
                r"caught.*WorkNCCL", r"SeqNum=1[2-6], OpType=(ALLGATHER|BROADCAST)", r"ms\)=600000\)$"]
    checked = 0
    for pattern in patterns:
        literals = required_literals(pattern)
        assert literals, pattern
        for text in texts:
            if re.search(pattern, text):
                checked += 1
                assert all(literal in text for literal in literals), (pattern, text, literals)
    assert checked >= len(patterns)


def test_filter_columns_cover_every_filter():
    """Evaluating a spec's expression needs only its filter_columns (the search's first phase reads those)."""
    import dataclasses

    from ranklog.query.filter_arrow import FILTER_COLUMNS

    filters = {f.name for f in dataclasses.fields(QuerySpec)} - {"limit", "order", "ignore_case"}
    assert filters == set(FILTER_COLUMNS)
    table = records_table(_records(TEXTS, 0, "gpu-node-000"))
    one_field = [QuerySpec(start_ns=START_NS), QuerySpec(end_ns=START_NS + 5 * 10**9), QuerySpec(levels=("ERROR",)),
                 QuerySpec(hosts=("gpu-*",)), QuerySpec(loggers=("x",)), QuerySpec(ips=("10.0.0.1",)),
                 QuerySpec(jobs=("j",)), QuerySpec(trace_ids=("t",)), QuerySpec(pids=(1,)), QuerySpec(ranks=(1,)),
                 QuerySpec(step_min=1), QuerySpec(step_max=2), QuerySpec(contains="x"), QuerySpec(regex="x"),
                 QuerySpec(attrs=("k",))]
    for spec in one_field:
        narrow = table.select(spec.filter_columns())
        assert narrow.filter(spec.expression()).num_rows == table.filter(spec.expression()).num_rows, spec
