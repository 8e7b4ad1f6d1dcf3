"""Judge ranklog's reading of a corpus entry against its truth, on the two paths a user has.

- raw: ``ranklog query --log_dir out/`` (the whole folder, parsed on the fly);
- archive: a real ``ranklog archive`` and one real ``ranklog agent`` per node folder
  (``--host <node>``), then ``ranklog query --archive ROOT``.

Both read what ``ranklog query`` returns (its parser, source and engine, in this process), so whatever
the read side joins is in.
:func:`score` counts, per field, the expected records (tests/corpus/truth.py) read right out of
those that show the field. Used by tests/benchmarks/bench_formats.py and tests/corpus/test_corpus.py.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from tests.corpus.truth import Entry, Expected

ROOT = Path(__file__).resolve().parent
FIELDS = ("boundary", "time", "level", "logger", "rank")
EXPECTED = ROOT / "accuracy.json"
COLUMNS = ["source", "offset", "ts", "level", "logger", "rank"]


def entries() -> list[Path]:
    """Every corpus entry (a folder with truth/sources.json), by name."""
    return sorted(p.parents[1] for p in ROOT.glob("*/truth/sources.json"))


def _read(*flags: str) -> list[dict[str, Any]]:
    """What ``ranklog query FLAGS --sort none`` returns, read in this process through the same parser,
    source and engine as the command (no output file in between)."""
    from ranklog.commands._source_flags import open_from_args
    from ranklog.commands.query import build_parser
    from ranklog.query import engine
    from ranklog.query.filter_flags import spec_from_args

    args = build_parser("ranklog query").parse_args([*flags, "--sort", "none"])
    table = engine.read(open_from_args(args), spec_from_args(args), COLUMNS)
    table = table.set_column(table.schema.get_field_index("ts"), "ts", table["ts"].cast("int64"))
    return table.to_pylist()


def read_raw(entry: Entry) -> list[dict[str, Any]]:
    return _read("--log_dir", str(entry.out))


def read_archive(chosen: list[Entry]) -> list[dict[str, Any]]:
    """Ship every node folder of the chosen entries through real agents (one per host name) into one
    real archive, then query it; records tell their entry by their source path."""
    from tests.scenarios.harness import shipped_folders

    hosts: dict[str, list[Path]] = {}
    for entry in chosen:
        for node in entry.nodes():
            hosts.setdefault(node, []).append(entry.out / node)
    with tempfile.TemporaryDirectory(prefix="corpus-") as work, shipped_folders(hosts, Path(work)) as root:
        return _read("--archive", str(root))


def score(entry: Entry, records: list[dict[str, Any]]) -> dict[str, list[int]]:
    """Per field, [right, shown]: of the expected records that show the field, how many were read right."""
    out = str(entry.out.resolve())
    by_source: dict[str, dict[int, dict[str, Any]]] = {}
    for record in records:
        source = str(Path(record["source"]).resolve()) if record["source"] else ""
        if source.startswith(out + "/"):
            by_source.setdefault(source[len(out) + 1:], {})[record["offset"]] = record
    sorted_offsets = {source: sorted(found) for source, found in by_source.items()}
    totals = {f: [0, 0] for f in FIELDS}
    for expected in entry.expected:
        starts = by_source.get(expected.source, {})
        for name, right in _judge(expected, starts, sorted_offsets.get(expected.source, [])).items():
            totals[name][0] += right
            totals[name][1] += 1
    return totals


def _judge(expected: Expected, starts: dict[int, dict[str, Any]], offsets: list[int]) -> dict[str, bool]:
    first = expected.lines[0]
    holder = starts.get(first) or _containing(starts, offsets, first)
    if expected.kind == "foreign":  # only the rank its file or prefix reveals
        return {} if expected.rank is None else {"rank": bool(holder) and holder["rank"] == expected.rank}
    marks = {}
    unsplit = not any(line in starts for line in expected.lines[1:])
    if expected.header:
        marks["boundary"] = first in starts and unsplit
    elif len(expected.lines) > 1:
        marks["boundary"] = unsplit
    # a headed record must be read from its own start; a headerless one may sit inside the record before it
    record = starts.get(first) if expected.header else holder
    for name, want, got in (("time", expected.time_us, "ts"), ("level", expected.level, "level"),
                            ("logger", expected.logger, "logger"), ("rank", expected.rank, "rank")):
        if want is not None:
            marks[name] = record is not None and record[got] == want
    return marks


def _containing(starts: dict[int, dict[str, Any]], offsets: list[int], offset: int) -> dict[str, Any] | None:
    import bisect

    at = bisect.bisect_right(offsets, offset) - 1
    return starts[offsets[at]] if at >= 0 else None


def load_expected() -> dict[str, Any]:
    return json.loads(EXPECTED.read_text()) if EXPECTED.exists() else {}
